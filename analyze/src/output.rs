//! How results are printed: an aligned table, CSV, or one JSON array.
//!
//! This module turns record batches into text; it does not run queries
//! (that is [`crate::session`]) and does not choose where the text goes (the
//! caller passes a writer). Every command prints through [`BatchWriter`], so
//! `--format` means the same everywhere:
//!
//! - `table`: aligned columns with a header; a null shows as `NULL`, so it
//!   never looks like a measured 0; an empty result shows its header.
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
use datafusion::arrow::util::display::FormatOptions;
use datafusion::arrow::util::pretty::pretty_format_batches_with_options;
use datafusion::arrow::{csv, json};

use crate::error::Error;

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
/// CSV and JSON are written as batches arrive, so a large result is never
/// held in memory; a table needs every row to align its columns, so it is
/// written by [`BatchWriter::finish`]. Nothing is written before the first
/// batch (so a query that fails at once prints nothing), and nothing is
/// complete before `finish` returns (the CSV header of a result without rows
/// written, the JSON array closed, the table printed, `W` flushed).
pub struct BatchWriter<W: Write> {
    inner: Inner<W>,
}

enum Inner<W: Write> {
    Table { out: W, schema: SchemaRef, batches: Vec<RecordBatch> },
    Csv { out: W, schema: SchemaRef, header: bool },
    Json(json::Writer<W, json::writer::JsonArray>),
}

impl<W: Write> std::fmt::Debug for BatchWriter<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let format = match &self.inner {
            Inner::Table { .. } => Format::Table,
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
            Format::Table => Inner::Table { out, schema, batches: Vec::new() },
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
            Inner::Table { batches, .. } => {
                if batch.num_rows() > 0 {
                    batches.push(batch.clone());
                }
                Ok(())
            }
            Inner::Csv { out, header, .. } => write_csv(out, header, batch),
            Inner::Json(writer) => writer.write(batch).map_err(|e| format_error(Format::Json, e)),
        }
    }

    /// Completes the output and flushes it; returns the writer.
    pub fn finish(self) -> Result<W, Error> {
        let mut out = match self.inner {
            Inner::Table { mut out, schema, mut batches } => {
                if batches.is_empty() {
                    // The first batch gives the header; an empty one keeps it
                    // for a result without rows.
                    batches.push(RecordBatch::new_empty(schema));
                }
                let options = FormatOptions::default().with_display_error(true).with_null("NULL");
                let table = pretty_format_batches_with_options(&batches, &options)
                    .map_err(|e| format_error(Format::Table, e))?;
                writeln!(out, "{table}").map_err(|source| Error::Write { source })?;
                out
            }
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
                writeln!(out).map_err(|source| Error::Write { source })?;
                out
            }
        };
        out.flush().map_err(|source| Error::Write { source })?;
        Ok(out)
    }
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
    out.write_all(&buf).map_err(|source| Error::Write { source })
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

/// An Arrow writer error: a failed write to the output stays an I/O error
/// (so a closed pipe is recognised), anything else is a formatting error.
fn format_error(format: Format, err: ArrowError) -> Error {
    match err {
        ArrowError::IoError(_, source) => Error::Write { source },
        source => Error::Format { format: format.name(), source },
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
    fn empty_table_keeps_its_header() {
        let (schema, _) = sample();
        let text = render(Format::Table, &[], schema);
        assert!(text.contains("| ts | host | util |"), "{text}");
    }
}
