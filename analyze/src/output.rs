//! How results are printed: an aligned table, CSV, or one JSON array.
//!
//! This module turns record batches into text; it does not run queries
//! (that is [`crate::session`]) and does not choose where the text goes (the
//! caller passes a writer). Every command prints through [`BatchWriter`], so
//! `--format` means the same everywhere; a figure's typed rows
//! (`crate::figures`) print through [`write_rows`], as the batch their
//! [`Rows::to_batch`] states:
//!
//! - `table`: aligned columns with a header; a null shows as `NULL`, so it
//!   never looks like a measured 0; an empty result shows its header. The
//!   column widths come from the first [`TABLE_WIDTH_ROWS`] rows; the rows
//!   after them are printed batch by batch in those widths (a longer value
//!   widens its own line only), so a table of millions of rows streams in
//!   bounded memory like the other formats.
//! - `csv`: a header line, then one line per row; a null is an empty field.
//! - `json`: one JSON array of objects keyed by column name (`[]` when there
//!   are no rows); a null is `null`, never a missing key.
//!
//! Timestamps (`Timestamp(ms, "UTC")`) print as RFC 3339 UTC instants ending
//! in `Z` in every format; dates as `YYYY-MM-DD`.

use std::io::Write;

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::error::ArrowError;
use datafusion::arrow::util::display::{ArrayFormatter, FormatOptions};
use datafusion::arrow::util::pretty::pretty_format_batches_with_options;
use datafusion::arrow::{csv, json};

use crate::error::{Error, OutputError};

/// Rows a table holds back to size its columns before it prints.
pub const TABLE_WIDTH_ROWS: usize = 1_000;

/// The output format chosen with `--format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Format {
    /// Aligned columns for a terminal.
    #[default]
    Table,
    /// Comma-separated values with a header line.
    Csv,
    /// One JSON array of row objects keyed by column name.
    Json,
}

impl Format {
    /// The format's name as `--format` spells it.
    pub fn name(self) -> &'static str {
        match self {
            Format::Table => "table",
            Format::Csv => "csv",
            Format::Json => "json",
        }
    }
}

/// Writes record batches of one schema to `W` in one [`Format`].
///
/// CSV and JSON are written as batches arrive, and a table once its first
/// [`TABLE_WIDTH_ROWS`] rows have sized its columns, so a large result is
/// never held in memory. Nothing is written before the first batch (a
/// table: before its first rows are sized, or `finish`), so a query that
/// fails at once prints nothing; nothing is complete before `finish`
/// returns (the CSV header of a result without rows written, the JSON array
/// closed, the table's last border drawn, `W` flushed).
pub struct BatchWriter<W: Write> {
    inner: Inner<W>,
}

enum Inner<W: Write> {
    Table(TableWriter<W>),
    Csv { out: W, schema: SchemaRef, header: bool },
    Json(json::Writer<W, json::writer::JsonArray>),
}

impl<W: Write> std::fmt::Debug for BatchWriter<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let format = match &self.inner {
            Inner::Table(_) => Format::Table,
            Inner::Csv { .. } => Format::Csv,
            Inner::Json(_) => Format::Json,
        };
        f.debug_struct("BatchWriter").field("format", &format).finish_non_exhaustive()
    }
}

impl<W: Write> BatchWriter<W> {
    /// A writer of rows with `schema` in `format` to `out`.
    pub fn new(format: Format, schema: SchemaRef, out: W) -> Self {
        let inner = match format {
            Format::Table => {
                Inner::Table(TableWriter { out, schema, head: Vec::new(), head_rows: 0, body: None })
            }
            Format::Csv => Inner::Csv { out, schema, header: true },
            Format::Json => Inner::Json(
                json::WriterBuilder::new().with_explicit_nulls(true).build::<_, json::writer::JsonArray>(out),
            ),
        };
        Self { inner }
    }

    /// Adds the rows of `batch` (of the schema given to [`BatchWriter::new`]).
    pub fn write(&mut self, batch: &RecordBatch) -> Result<(), Error> {
        match &mut self.inner {
            Inner::Table(table) => table.write(batch),
            Inner::Csv { out, header, .. } => write_csv(out, header, batch),
            Inner::Json(writer) => writer.write(batch).map_err(|e| format_error(Format::Json, e)),
        }
    }

    /// Completes the output and flushes it; returns the writer.
    pub fn finish(self) -> Result<W, Error> {
        let mut out = match self.inner {
            Inner::Table(table) => table.finish()?,
            Inner::Csv { mut out, schema, mut header } => {
                if header {
                    // A result without rows still gets its header.
                    write_csv(&mut out, &mut header, &RecordBatch::new_empty(schema))?;
                }
                out
            }
            Inner::Json(mut writer) => {
                writer.finish().map_err(|e| format_error(Format::Json, e))?;
                let mut out = writer.into_inner();
                writeln!(out).map_err(|source| OutputError::Write { source })?;
                out
            }
        };
        out.flush().map_err(|source| OutputError::Write { source })?;
        Ok(out)
    }
}

/// A table being written: the first rows held back to size the columns,
/// then each batch as it comes.
struct TableWriter<W: Write> {
    out: W,
    schema: SchemaRef,
    /// The rows held back, while `body` is `None`.
    head: Vec<RecordBatch>,
    head_rows: usize,
    /// Once the head is printed: each column's width and the border line.
    body: Option<(Vec<usize>, String)>,
}

impl<W: Write> TableWriter<W> {
    fn options() -> FormatOptions<'static> {
        FormatOptions::default().with_display_error(true).with_null("NULL")
    }

    fn write(&mut self, batch: &RecordBatch) -> Result<(), Error> {
        if batch.num_rows() == 0 {
            return Ok(());
        }
        match &self.body {
            Some((widths, _)) => {
                let text = rows_in_widths(batch, widths)?;
                self.out.write_all(text.as_bytes()).map_err(|source| OutputError::Write { source }.into())
            }
            None => {
                self.head.push(batch.clone());
                self.head_rows += batch.num_rows();
                if self.head_rows >= TABLE_WIDTH_ROWS { self.print_head() } else { Ok(()) }
            }
        }
    }

    /// Prints the header and the rows held back, without the last border,
    /// and keeps their widths for the rows to come.
    fn print_head(&mut self) -> Result<(), Error> {
        let table = self.head_table()?;
        let (top, bottom) = table.rsplit_once('\n').unwrap_or(("", table.as_str()));
        let widths =
            bottom.trim_matches('+').split('+').map(|dashes| dashes.len().saturating_sub(2)).collect();
        writeln!(self.out, "{top}").map_err(|source| OutputError::Write { source })?;
        self.body = Some((widths, bottom.to_owned()));
        self.head = Vec::new();
        Ok(())
    }

    /// The rows held back as arrow draws a table (an empty result: its
    /// header alone).
    fn head_table(&mut self) -> Result<String, Error> {
        if self.head.is_empty() {
            self.head.push(RecordBatch::new_empty(std::sync::Arc::clone(&self.schema)));
        }
        let table = pretty_format_batches_with_options(&self.head, &Self::options())
            .map_err(|e| format_error(Format::Table, e))?;
        Ok(table.to_string())
    }

    fn finish(mut self) -> Result<W, Error> {
        match &self.body {
            Some((_, border)) => writeln!(self.out, "{border}"),
            None => {
                let table = self.head_table()?;
                writeln!(self.out, "{table}")
            }
        }
        .map_err(|source| OutputError::Write { source })?;
        Ok(self.out)
    }
}

/// The rows of `batch` as table lines in `widths` (each cell padded to its
/// column's width; a value that is wider widens its own line; a value with
/// line breaks takes a line for each, as arrow's tables do).
fn rows_in_widths(batch: &RecordBatch, widths: &[usize]) -> Result<String, Error> {
    use unicode_width::UnicodeWidthStr;
    let options = TableWriter::<std::io::Sink>::options();
    let formatters = batch
        .columns()
        .iter()
        .map(|c| ArrayFormatter::try_new(c.as_ref(), &options))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format_error(Format::Table, e))?;
    let mut text = String::new();
    for row in 0..batch.num_rows() {
        let cells: Vec<String> = formatters.iter().map(|f| f.value(row).to_string()).collect();
        let cell_lines: Vec<Vec<&str>> = cells.iter().map(|c| c.split('\n').collect()).collect();
        let height = cell_lines.iter().map(Vec::len).max().unwrap_or(1);
        for line in 0..height {
            text.push('|');
            for (lines, width) in cell_lines.iter().zip(widths) {
                let value = lines.get(line).copied().unwrap_or("");
                text.push(' ');
                text.push_str(value);
                text.push_str(&" ".repeat(width.saturating_sub(value.width())));
                text.push_str(" |");
            }
            text.push('\n');
        }
    }
    Ok(text)
}

/// Formats `batch` as CSV lines (after the header, the first time) and
/// writes them to the output. arrow's CSV writer reports a failed write as
/// text, so it writes into memory and the output is written here, keeping a
/// closed pipe recognisable.
fn write_csv<W: Write>(out: &mut W, header: &mut bool, batch: &RecordBatch) -> Result<(), Error> {
    let mut buf = Vec::new();
    csv::WriterBuilder::new()
        .with_header(*header)
        .build(&mut buf)
        .write(batch)
        .map_err(|e| format_error(Format::Csv, e))?;
    *header = false;
    out.write_all(&buf).map_err(|source| OutputError::Write { source }.into())
}

/// Writes `batches` (all of `schema`) to `out` in `format`, completely.
pub fn write_batches<W: Write>(
    format: Format,
    schema: SchemaRef,
    batches: &[RecordBatch],
    out: W,
) -> Result<W, Error> {
    let mut writer = BatchWriter::new(format, schema, out);
    for batch in batches {
        writer.write(batch)?;
    }
    writer.finish()
}

/// Typed rows that print: each figure's rows say once, in
/// [`Rows::to_batch`], which columns they print, in what order, of what
/// type and rounded how. The monthly report's tables are the same batches.
pub trait Rows {
    /// The rows as printed (names, order, types and rounding of the
    /// columns).
    fn to_batch(&self) -> Result<RecordBatch, ArrowError>;
}

/// Writes `rows` to `out` in `format`, completely.
pub fn write_rows<W: Write>(format: Format, rows: &impl Rows, out: W) -> Result<W, Error> {
    let batch = rows.to_batch().map_err(|e| format_error(format, e))?;
    write_batches(format, batch.schema(), &[batch], out)
}

/// An Arrow writer error: a failed write to the output stays an I/O error
/// (so a closed pipe is recognised), anything else is a formatting error.
fn format_error(format: Format, err: ArrowError) -> Error {
    match err {
        ArrowError::IoError(_, source) => OutputError::Write { source }.into(),
        source => OutputError::Format { format: format.name(), source }.into(),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use datafusion::arrow::array::{ArrayRef, Int32Array, StringArray, TimestampMillisecondArray};
    use datafusion::arrow::datatypes::{DataType, Field, Schema, TimeUnit};

    use super::*;

    fn sample() -> (SchemaRef, RecordBatch) {
        let schema = Arc::new(Schema::new(vec![
            Field::new("ts", DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into())), false),
            Field::new("host", DataType::Utf8, true),
            Field::new("util", DataType::Int32, true),
        ]));
        let columns: Vec<ArrayRef> = vec![
            // 2026-11-30T01:45:00.000Z and .250 later.
            Arc::new(
                TimestampMillisecondArray::from(vec![1_796_003_100_000, 1_796_003_100_250])
                    .with_timezone("UTC"),
            ),
            Arc::new(StringArray::from(vec![Some("node07"), Some("a,b")])),
            Arc::new(Int32Array::from(vec![Some(0), None])),
        ];
        let batch = RecordBatch::try_new(schema.clone(), columns).expect("columns match");
        (schema, batch)
    }

    fn render(format: Format, batches: &[RecordBatch], schema: SchemaRef) -> String {
        let out = write_batches(format, schema, batches, Vec::new()).expect("writes to memory");
        String::from_utf8(out).expect("output is UTF-8")
    }

    #[test]
    fn table_aligns_and_shows_null_apart_from_zero() {
        let (schema, batch) = sample();
        let text = render(Format::Table, &[batch], schema);
        assert!(text.contains("| 2026-11-30T01:45:00Z     | node07 | 0    |"), "{text}");
        assert!(text.contains("| 2026-11-30T01:45:00.250Z | a,b    | NULL |"), "{text}");
    }

    #[test]
    fn csv_has_a_header_and_quotes_commas() {
        let (schema, batch) = sample();
        let text = render(Format::Csv, &[batch], schema.clone());
        assert_eq!(text, "ts,host,util\n2026-11-30T01:45:00Z,node07,0\n2026-11-30T01:45:00.250Z,\"a,b\",\n");
        assert_eq!(render(Format::Csv, &[], schema), "ts,host,util\n");
    }

    #[test]
    fn json_is_one_array_with_explicit_nulls() {
        let (schema, batch) = sample();
        let text = render(Format::Json, &[batch.clone(), batch], schema.clone());
        assert_eq!(text.matches("\"util\":null").count(), 2, "{text}");
        assert!(text.starts_with("[{\"ts\":\"2026-11-30T01:45:00Z\",\"host\":\"node07\",\"util\":0}"));
        assert!(text.trim_end().ends_with(']'));
        assert_eq!(render(Format::Json, &[], schema), "[]\n");
    }

    #[test]
    fn a_long_table_streams_in_the_widths_of_its_first_rows() {
        use datafusion::arrow::array::Int64Array;
        let schema = Arc::new(Schema::new(vec![
            Field::new("n", DataType::Int64, false),
            Field::new("name", DataType::Utf8, true),
        ]));
        let batch = |from: i64, count: i64, name: &str| {
            let columns: Vec<ArrayRef> = vec![
                // Two digits at most, so the first rows' widths fit all.
                Arc::new(Int64Array::from((from..from + count).map(|i| i % 100).collect::<Vec<_>>())),
                Arc::new(StringArray::from(vec![Some(name); count as usize])),
            ];
            RecordBatch::try_new(schema.clone(), columns).expect("columns match")
        };
        let n = TABLE_WIDTH_ROWS as i64;
        let batches = [batch(0, n, "ab"), batch(n, 2, "ab"), batch(n + 2, 1, "a\nlonger one")];
        let streamed = render(Format::Table, &batches, schema.clone());
        // Arrow draws the same table from every row at once (the widths of
        // the first rows hold for the rest).
        let whole = render(Format::Table, &[batch(0, n + 2, "ab")], schema.clone());
        let mut lines: Vec<&str> = streamed.lines().collect();
        let last_row = [lines.remove(lines.len() - 3), lines.remove(lines.len() - 2)];
        assert_eq!(lines.join("\n"), whole.trim_end(), "the first rows and the border");
        assert_eq!(last_row, ["| 2  | a    |", "|    | longer one |"]);

        // Once the head is printed, a batch goes out as it comes.
        let mut writer = BatchWriter::new(Format::Table, schema.clone(), Vec::new());
        writer.write(&batch(0, n, "x")).expect("writes");
        let Inner::Table(table) = &writer.inner else { panic!("a table") };
        assert!(table.head.is_empty() && !table.out.is_empty(), "the head is printed, not held");
        writer.write(&batch(n, 1, "x")).expect("writes");
        let Inner::Table(table) = &writer.inner else { panic!("a table") };
        assert!(String::from_utf8_lossy(&table.out).ends_with("| 0  | x    |\n"));
    }

    #[test]
    fn empty_table_keeps_its_header() {
        let (schema, _) = sample();
        let text = render(Format::Table, &[], schema);
        assert!(text.contains("| ts | host | util |"), "{text}");
    }
}
