//! How results are printed: an aligned table, CSV, or one JSON array.
//!
//! This module turns record batches into text; it does not run queries
//! (that is [`crate::session`]) and does not choose where the text goes (the
//! caller passes a writer). Every command prints through [`BatchWriter`], so
//! `--format` means the same everywhere; a figure's typed rows
//! (`crate::report::figures`) print through [`write_rows`], as the batch their
//! [`Rows::to_batch`] states:
//!
//! - `table`: aligned columns with a header, numbers right-aligned; a null
//!   shows as an empty cell in a named report's table, as `NULL` in `apron
//!   sql`'s, so it never looks like a measured 0; an empty result shows
//!   its header. A named report's table ([`Style::report`]) shows
//!   money as money in the config's currency (`$1,234.56`), hours and other
//!   decimals with two places and percentages with one, by the kind the
//!   column's field carries ([`Kind::of`]: the figure's batch takes it from
//!   the report's column table, [`apron_reports::COLUMNS`], which the page
//!   reads too); `apron sql` shows numbers as computed
//!   ([`Style::plain`]). The column widths come from the first
//!   [`TABLE_WIDTH_ROWS`] rows; the rows after them are printed batch by
//!   batch in those widths (a longer value widens its own line only), so a
//!   table of millions of rows streams in bounded memory like the other
//!   formats.
//! - `csv`: a header line, then one line per row; a null is an empty field;
//!   numbers as the batch holds them, whatever the style (a figure rounds
//!   its rows once, in [`Rows::to_batch`]: money to the cent, hours to two
//!   decimals, percentages to one; the terminal rounds nothing further); text a spreadsheet would run as a
//!   formula (`=HYPERLINK(…)`) starts with `'`, as in every CSV apron
//!   writes ([`apron_reports::csv_cell`]).
//! - `json`: one JSON array of objects keyed by column name (`[]` when there
//!   are no rows); a null is `null`, never a missing key.
//!
//! Timestamps (`Timestamp(ms, "UTC")`) print as RFC 3339 UTC instants ending
//! in `Z` in every format; dates as `YYYY-MM-DD`.

use std::io::Write;

use datafusion::arrow::array::{Array, AsArray, RecordBatch};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{
    DataType, Field, Float64Type, SchemaRef, TimeUnit, TimestampMillisecondType,
};
use datafusion::arrow::error::ArrowError;
use datafusion::arrow::util::display::{ArrayFormatter, FormatOptions};
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

/// What a column's numbers are on the terminal, by the kind its field
/// carries (`crate::report::columns::kinded`: the report's column table,
/// [`apron_reports::COLUMNS`], says it once for the terminal and the page).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// An amount of the config's currency.
    Money,
    /// Hours or GPU-hours.
    Hours,
    /// A percentage.
    Percent,
    /// A count of bytes or minutes, shown whole with thousands separators.
    Count,
    /// Anything else, or a column without a kind.
    Other,
}

impl Kind {
    /// The kind of the column `field`: as its metadata says
    /// ([`apron_reports::KIND_KEY`]), so a column is money on the terminal
    /// exactly when it is money on the page (`worth`, `spent`); a field
    /// without a kind (a query's column) is [`Kind::Other`].
    pub fn of(field: &Field) -> Kind {
        use apron_reports::ColumnKind;
        let kind = field.metadata().get(apron_reports::KIND_KEY).and_then(|k| ColumnKind::from_name(k));
        match kind {
            Some(ColumnKind::Money) => Kind::Money,
            Some(ColumnKind::Hours) => Kind::Hours,
            Some(ColumnKind::Percent) => Kind::Percent,
            Some(ColumnKind::Bytes | ColumnKind::Minutes) => Kind::Count,
            _ => Kind::Other,
        }
    }
}

/// How a table shows its numbers (csv and json always keep them in full).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Style {
    /// The config's currency for a named report's money columns; `None`:
    /// numbers as computed.
    currency: Option<String>,
}

impl Style {
    /// How a null shows: an empty cell in a named report, `NULL` (as
    /// SQL writes it) in `apron sql`'s results.
    fn null(&self) -> &'static str {
        if self.currency.is_some() { "" } else { "NULL" }
    }

    /// Numbers as computed, right-aligned: `apron sql`'s results.
    pub fn plain() -> Style {
        Style { currency: None }
    }

    /// A named report's table: money in `currency` with cents and
    /// thousands separators, hours and other decimals with two places,
    /// percentages with one.
    pub fn report(currency: &str) -> Style {
        Style { currency: Some(currency.to_owned()) }
    }

    /// The text of each value of the column `field`, or `None` where
    /// arrow's own display is the style: a decimal by its [`Kind`]; a count
    /// of bytes or minutes with thousands separators; a time to the second
    /// (the milliseconds of a process's start tell a person nothing). A
    /// null is empty.
    fn column(&self, field: &Field, column: &dyn Array) -> Option<Vec<String>> {
        use apron_reports::{grouped, money};
        let currency = self.currency.as_deref()?;
        let texts = |value: &dyn Fn(usize) -> String| {
            (0..column.len()).map(|i| if column.is_null(i) { String::new() } else { value(i) }).collect()
        };
        match column.data_type() {
            DataType::Float16 | DataType::Float32 | DataType::Float64 => {
                let floats = cast(column, &DataType::Float64).ok()?;
                let floats = floats.as_primitive::<Float64Type>();
                let kind = Kind::of(field);
                Some(texts(&|i| match kind {
                    Kind::Money => money(floats.value(i), currency),
                    Kind::Percent => grouped(floats.value(i), 1),
                    Kind::Hours | Kind::Count | Kind::Other => grouped(floats.value(i), 2),
                }))
            }
            t if t.is_integer() && Kind::of(field) == Kind::Count => {
                let floats = cast(column, &DataType::Float64).ok()?;
                let floats = floats.as_primitive::<Float64Type>();
                Some(texts(&|i| grouped(floats.value(i), 0)))
            }
            DataType::Timestamp(TimeUnit::Millisecond, Some(_)) => {
                let times = column.as_primitive::<TimestampMillisecondType>();
                Some(texts(&|i| {
                    chrono::DateTime::from_timestamp_millis(times.value(i)).map_or_else(
                        || times.value(i).to_string(),
                        |t| t.format("%Y-%m-%dT%H:%M:%SZ").to_string(),
                    )
                }))
            }
            _ => None,
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
    /// A writer of rows with `schema` in `format` to `out`, numbers as
    /// computed ([`Style::plain`]).
    pub fn new(format: Format, schema: SchemaRef, out: W) -> Self {
        Self::styled(format, schema, out, &Style::plain())
    }

    /// A writer of rows with `schema` in `format` to `out`, a table's
    /// numbers shown in `style`.
    pub fn styled(format: Format, schema: SchemaRef, out: W, style: &Style) -> Self {
        let inner = match format {
            Format::Table => {
                Inner::Table(TableWriter { out, schema, style: style.clone(), head: Vec::new(), body: None })
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

/// A table being written: the first rows held back (as text) to size the
/// columns, then each batch as it comes.
struct TableWriter<W: Write> {
    out: W,
    schema: SchemaRef,
    style: Style,
    /// The rows held back, each a cell's text per column, while `body` is
    /// `None`.
    head: Vec<Vec<String>>,
    /// Once the head is printed: the columns' widths and sides.
    body: Option<Layout>,
}

/// The columns of a printed table.
struct Layout {
    widths: Vec<usize>,
    /// Whether each column is aligned right (numbers).
    right: Vec<bool>,
}

impl Layout {
    /// `+------+-----+`.
    fn border(&self) -> String {
        let dashes: Vec<String> = self.widths.iter().map(|w| "-".repeat(w + 2)).collect();
        format!("+{}+\n", dashes.join("+"))
    }

    /// One row's lines: each cell padded to its column's width on its side;
    /// a value that is wider widens its own line only; a value with line
    /// breaks takes a line for each.
    fn row(&self, cells: &[String], text: &mut String) {
        if cells.iter().any(|c| c.contains('\n')) {
            let cell_lines: Vec<Vec<&str>> = cells.iter().map(|c| c.split('\n').collect()).collect();
            let height = cell_lines.iter().map(Vec::len).max().unwrap_or(1);
            for line in 0..height {
                self.line(text, cell_lines.iter().map(|lines| lines.get(line).copied().unwrap_or("")));
            }
        } else {
            self.line(text, cells.iter().map(String::as_str));
        }
    }

    /// One line of a row onto `text`: `| a |   1 |`.
    fn line<'a>(&self, text: &mut String, values: impl Iterator<Item = &'a str>) {
        text.push('|');
        for ((value, width), right) in values.zip(&self.widths).zip(&self.right) {
            let pad = width.saturating_sub(display_width(value));
            text.push(' ');
            if *right {
                spaces(text, pad);
                text.push_str(value);
            } else {
                text.push_str(value);
                spaces(text, pad);
            }
            text.push_str(" |");
        }
        text.push('\n');
    }
}

/// The columns `value` takes on a terminal: its length when it is all
/// printable ASCII (numbers, names, times: nearly every cell, and the
/// cheap case), else as Unicode says (wide characters, combining marks).
fn display_width(value: &str) -> usize {
    if value.bytes().all(|b| (b' '..=b'~').contains(&b)) {
        value.len()
    } else {
        unicode_width::UnicodeWidthStr::width(value)
    }
}

/// Appends `n` spaces to `text`.
fn spaces(text: &mut String, mut n: usize) {
    const SPACES: &str = "                                                                ";
    while n > 0 {
        let run = n.min(SPACES.len());
        text.push_str(&SPACES[..run]);
        n -= run;
    }
}

impl<W: Write> TableWriter<W> {
    fn write(&mut self, batch: &RecordBatch) -> Result<(), Error> {
        if batch.num_rows() == 0 {
            return Ok(());
        }
        let rows = cells(batch, &self.style)?;
        match &self.body {
            Some(layout) => {
                let mut text =
                    String::with_capacity(rows.len() * layout.widths.iter().map(|w| w + 3).sum::<usize>());
                for row in &rows {
                    layout.row(row, &mut text);
                }
                self.out.write_all(text.as_bytes()).map_err(|source| OutputError::Write { source }.into())
            }
            None => {
                self.head.extend(rows);
                if self.head.len() >= TABLE_WIDTH_ROWS { self.print_head() } else { Ok(()) }
            }
        }
    }

    /// Prints the header and the rows held back, without the last border,
    /// and keeps their widths for the rows to come.
    fn print_head(&mut self) -> Result<(), Error> {
        let names: Vec<String> =
            self.schema.fields().iter().map(|f| printable_owned(f.name().clone())).collect();
        let widest = |column: usize| {
            self.head
                .iter()
                .flat_map(|row| row[column].split('\n'))
                .chain(names[column].split('\n'))
                .map(display_width)
                .max()
                .unwrap_or(0)
        };
        let layout = Layout {
            widths: (0..names.len()).map(widest).collect(),
            right: self.schema.fields().iter().map(|f| is_number(f.data_type())).collect(),
        };
        let mut text = layout.border();
        layout.row(&names, &mut text);
        text.push_str(&layout.border());
        for row in std::mem::take(&mut self.head) {
            layout.row(&row, &mut text);
        }
        self.out.write_all(text.as_bytes()).map_err(|source| OutputError::Write { source })?;
        self.body = Some(layout);
        Ok(())
    }

    fn finish(mut self) -> Result<W, Error> {
        if self.body.is_none() {
            self.print_head()?;
        }
        let border = self.body.as_ref().map(Layout::border).unwrap_or_default();
        self.out.write_all(border.as_bytes()).map_err(|source| OutputError::Write { source })?;
        Ok(self.out)
    }
}

/// Whether a column of `data_type` holds numbers (aligned right).
fn is_number(data_type: &DataType) -> bool {
    data_type.is_numeric()
}

/// The text of every cell of `batch`, row by row: a null as the style
/// shows it ([`Style::null`]), a
/// column in `style` ([`Style::column`]), anything else as arrow shows it
/// (times as RFC 3339 instants ending in `Z`); control characters shown as
/// escapes ([`apron_cli::printable::printable`]), so a recorded name cannot
/// act on the terminal or forge a row.
fn cells(batch: &RecordBatch, style: &Style) -> Result<Vec<Vec<String>>, Error> {
    let options = FormatOptions::default().with_display_error(true).with_null(style.null());
    let schema = batch.schema();
    let columns: Vec<Vec<String>> = batch
        .columns()
        .iter()
        .zip(schema.fields())
        .map(|(column, field)| match style.column(field, column.as_ref()) {
            Some(texts) => Ok(texts),
            None => {
                let formatter = ArrayFormatter::try_new(column.as_ref(), &options)?;
                Ok((0..column.len()).map(|i| printable_owned(formatter.value(i).to_string())).collect())
            }
        })
        .collect::<Result<_, ArrowError>>()
        .map_err(|e| format_error(Format::Table, e))?;
    // Each column's texts moved, not copied, into the rows.
    let mut columns: Vec<_> = columns.into_iter().map(Vec::into_iter).collect();
    Ok((0..batch.num_rows())
        .map(|_| columns.iter_mut().map(|c| c.next().unwrap_or_default()).collect())
        .collect())
}

/// `text`, its control characters shown as escapes.
fn printable_owned(text: String) -> String {
    match apron_cli::printable::printable(&text) {
        std::borrow::Cow::Borrowed(_) => text,
        std::borrow::Cow::Owned(escaped) => escaped,
    }
}

/// Formats `batch` as CSV lines (after the header, the first time) and
/// writes them to the output. arrow's CSV writer reports a failed write as
/// text, so it writes into memory and the output is written here, keeping a
/// closed pipe recognisable.
fn write_csv<W: Write>(out: &mut W, header: &mut bool, batch: &RecordBatch) -> Result<(), Error> {
    let batch = spreadsheet_safe(batch).map_err(|e| format_error(Format::Csv, e))?;
    let mut buf = Vec::new();
    csv::WriterBuilder::new()
        .with_header(*header)
        .build(&mut buf)
        .write(&batch)
        .map_err(|e| format_error(Format::Csv, e))?;
    *header = false;
    out.write_all(&buf).map_err(|source| OutputError::Write { source }.into())
}

/// `batch` with each text cell and column name as every CSV apron writes
/// has it ([`apron_reports::csv_cell::defused`]: a leading `'` on text a
/// spreadsheet would run as a formula). Only a column holding such a cell
/// is rebuilt; numbers, times and other columns are kept as they are.
fn spreadsheet_safe(batch: &RecordBatch) -> Result<RecordBatch, ArrowError> {
    use apron_reports::csv_cell::defused;
    use datafusion::arrow::array::{ArrayRef, StringArray};
    use datafusion::arrow::datatypes::{Field, Schema};
    use std::borrow::Cow;
    use std::sync::Arc;

    let schema = batch.schema();
    let mut fields = Vec::with_capacity(schema.fields().len());
    let mut columns = Vec::with_capacity(batch.num_columns());
    let mut changed = false;
    for (field, column) in schema.fields().iter().zip(batch.columns()) {
        let name = defused(field.name());
        let formula = |v: &str| matches!(defused(v), Cow::Owned(_));
        // Read where they are (no copy) to find one; copied only then.
        let any_formula = match field.data_type() {
            DataType::Utf8 => column.as_string::<i32>().iter().flatten().any(formula),
            DataType::LargeUtf8 => column.as_string::<i64>().iter().flatten().any(formula),
            DataType::Utf8View => column.as_string_view().iter().flatten().any(formula),
            DataType::Dictionary(_, value)
                if matches!(**value, DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View) =>
            {
                let values = cast(column.as_any_dictionary().values(), &DataType::Utf8)?;
                values.as_string::<i32>().iter().flatten().any(formula)
            }
            _ => false,
        };
        let rebuilt: Option<ArrayRef> = if any_formula {
            let text = cast(column, &DataType::Utf8)?;
            let cells = text.as_string::<i32>().iter().map(|v| v.map(|v| defused(v).into_owned()));
            Some(Arc::new(cells.collect::<StringArray>()))
        } else {
            None
        };
        changed |= matches!(name, Cow::Owned(_)) || rebuilt.is_some();
        let data_type = if rebuilt.is_some() { DataType::Utf8 } else { field.data_type().clone() };
        fields.push(Field::new(name.into_owned(), data_type, field.is_nullable()));
        columns.push(rebuilt.unwrap_or_else(|| Arc::clone(column)));
    }
    if !changed {
        return Ok(batch.clone());
    }
    RecordBatch::try_new(Arc::new(Schema::new(fields)), columns)
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

/// Writes `rows` to `out` in `format`, completely, a table's numbers in
/// `style`.
pub fn write_rows<W: Write>(format: Format, style: &Style, rows: &impl Rows, out: W) -> Result<W, Error> {
    let batch = rows.to_batch().map_err(|e| format_error(format, e))?;
    let mut writer = BatchWriter::styled(format, batch.schema(), out, style);
    writer.write(&batch)?;
    writer.finish()
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
        assert!(text.contains("| ts                       | host   | util |"), "{text}");
        assert!(text.contains("| 2026-11-30T01:45:00Z     | node07 |    0 |"), "{text}");
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
        // The same table drawn from every row at once (the widths of the
        // first rows hold for the rest).
        let whole = render(Format::Table, &[batch(0, n + 2, "ab")], schema.clone());
        assert!(whole.starts_with("+----+------+\n|  n | name |\n+----+------+\n|  0 | ab   |\n"), "{whole}");
        let mut lines: Vec<&str> = streamed.lines().collect();
        // A newline in a value shows as `\n`: one line per row, so a
        // recorded name cannot draw a row of its own.
        let last_row = lines.remove(lines.len() - 2);
        assert_eq!(lines.join("\n"), whole.trim_end(), "the first rows and the border");
        assert_eq!(last_row, "|  2 | a\\nlonger one |");

        // Once the head is printed, a batch goes out as it comes.
        let mut writer = BatchWriter::new(Format::Table, schema.clone(), Vec::new());
        writer.write(&batch(0, n, "x")).expect("writes");
        let Inner::Table(table) = &writer.inner else { panic!("a table") };
        assert!(table.head.is_empty() && !table.out.is_empty(), "the head is printed, not held");
        writer.write(&batch(n, 1, "x")).expect("writes");
        let Inner::Table(table) = &writer.inner else { panic!("a table") };
        assert!(String::from_utf8_lossy(&table.out).ends_with("|  0 | x    |\n"));
    }

    #[test]
    fn control_characters_in_a_table_show_as_escapes_and_csv_keeps_them() {
        let schema = Arc::new(Schema::new(vec![Field::new("comm\u{7}", DataType::Utf8, true)]));
        let evil = "py\u{1b}]0;owned\u{7}\u{1b}[2J\r|  9 | forged";
        let columns: Vec<ArrayRef> = vec![Arc::new(StringArray::from(vec![Some(evil)]))];
        let batch = RecordBatch::try_new(schema.clone(), columns).expect("columns match");
        let table = render(Format::Table, std::slice::from_ref(&batch), schema.clone());
        assert!(!table.chars().any(|c| c.is_control() && c != '\n'), "{table:?}");
        assert!(table.contains("py\\u{1b}]0;owned\\u{7}\\u{1b}[2J\\r|  9 | forged"), "{table}");
        assert!(table.contains("comm\\u{7}"), "{table}");
        assert_eq!(table.lines().count(), 5, "one line per row:\n{table}");
        let csv = render(Format::Csv, &[batch], schema);
        assert!(csv.contains('\u{1b}'), "CSV keeps the data exact: {csv:?}");
    }

    /// The field `name` of `data_type` with its column's kind, as a figure's
    /// batch has it.
    fn kinded(name: &str, data_type: DataType, nullable: bool) -> Field {
        crate::report::columns::kinded(Field::new(name, data_type, nullable))
    }

    #[test]
    fn a_report_table_shows_money_hours_and_percents_csv_keeps_full_numbers() {
        use datafusion::arrow::array::{Float64Array, Int64Array};
        let schema = Arc::new(Schema::new(vec![
            kinded("team", DataType::Utf8, false),
            kinded("gpu_hours", DataType::Float64, false),
            kinded("idle_cost", DataType::Float64, true),
            kinded("share_pct", DataType::Float64, false),
            kinded("used_mem_bytes", DataType::Int64, false),
            kinded("pid", DataType::Int64, false),
            kinded("since", DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into())), false),
        ]));
        let columns: Vec<ArrayRef> = vec![
            Arc::new(StringArray::from(vec!["nlp", "vision"])),
            Arc::new(Float64Array::from(vec![6415.78, 0.0])),
            Arc::new(Float64Array::from(vec![Some(7230.3), None])),
            Arc::new(Float64Array::from(vec![26.2, 0.0])),
            Arc::new(Int64Array::from(vec![55_595_499_520, 0])),
            Arc::new(Int64Array::from(vec![28374, 7])),
            Arc::new(
                TimestampMillisecondArray::from(vec![1_796_003_100_250, 1_796_003_100_000])
                    .with_timezone("UTC"),
            ),
        ];
        let batch = RecordBatch::try_new(schema.clone(), columns).expect("columns match");
        let styled = |style: &Style| {
            let mut writer = BatchWriter::styled(Format::Table, schema.clone(), Vec::new(), style);
            writer.write(&batch).expect("writes");
            String::from_utf8(writer.finish().expect("finishes")).expect("UTF-8")
        };
        let euro = styled(&Style::report("EUR"));
        assert!(
            euro.contains(
                "| nlp    |  6,415.78 | €7,230.30 |      26.2 | 55,595,499,520 | 28374 | 2026-11-30T01:45:00Z |"
            ),
            "{euro}"
        );
        assert!(
            euro.contains("| vision |      0.00 |           |       0.0 |              0 |     7 |"),
            "{euro}"
        );
        // `apron sql`: as computed, right-aligned.
        let plain = styled(&Style::plain());
        assert!(
            plain.contains("| nlp    |   6415.78 |    7230.3 |      26.2 |    55595499520 | 28374 |"),
            "{plain}"
        );
        let csv = render(Format::Csv, &[batch], schema);
        assert!(csv.contains("nlp,6415.78,7230.3,26.2,55595499520,28374,2026-11-30T01:45:00.250Z"), "{csv}");
    }

    #[test]
    fn column_kinds_follow_the_names_units() {
        for (name, kind) in [
            ("cost", Kind::Money),
            ("idle_cost", Kind::Money),
            ("idle_cost_per_week", Kind::Money),
            ("budget", Kind::Money),
            ("forecast", Kind::Money),
            ("gpu_hours", Kind::Hours),
            ("idle_gpu_hours_per_week", Kind::Hours),
            ("share_pct", Kind::Percent),
            ("budget_used_pct", Kind::Percent),
            ("energy_kwh", Kind::Other),
            ("costume", Kind::Other),
            // The page's money columns without `cost` in their names.
            ("worth", Kind::Money),
            ("spent", Kind::Money),
            ("freed_pct_of_idle", Kind::Percent),
            ("gpu_index", Kind::Other),
        ] {
            assert_eq!(Kind::of(&kinded(name, DataType::Float64, true)), kind, "{name}");
        }
    }

    #[test]
    fn a_column_is_money_on_the_terminal_exactly_when_it_is_on_the_page() {
        for column in apron_reports::COLUMNS {
            let kind = Kind::of(&kinded(column.name, DataType::Float64, true));
            assert_eq!(
                kind == Kind::Money,
                column.kind == apron_reports::ColumnKind::Money,
                "{}",
                column.name
            );
            assert_eq!(kind == Kind::Percent, column.label.ends_with("(%)"), "{}", column.name);
        }
    }

    #[test]
    fn a_cells_width_is_what_the_terminal_shows() {
        use unicode_width::UnicodeWidthStr;
        for value in
            ["", "42", "node-01", "2026-11-30T01:45:00Z", "a\tb", "a\r\nb", "Zürich", "東京", "e\u{301}"]
        {
            assert_eq!(display_width(value), value.width(), "{value:?}");
        }
        let mut text = String::new();
        spaces(&mut text, 150);
        assert_eq!(text, " ".repeat(150));
    }

    #[test]
    fn empty_table_keeps_its_header() {
        let (schema, _) = sample();
        let text = render(Format::Table, &[], schema);
        assert!(text.contains("| ts | host | util |"), "{text}");
    }
}
