//! `apron sql QUERY --out FILE`: the result written to a file in the format
//! its extension names ([`FileFormat`]), batch by batch as the engine
//! yields them: a result larger than memory is never held whole.
//!
//! The rows go to a hidden temporary file beside FILE (`.FILE.XXXXXX.tmp`),
//! synced and renamed over FILE once complete ([`apron_files::replace`]:
//! never through a symbolic link; a FILE replaced keeps its mode, a new one
//! gets the umask's): a query that fails, or that Ctrl-C interrupts, leaves
//! FILE as it was and no temporary file behind (a process killed outright
//! leaves its hidden temporary file).
//! CSV and JSON are written exactly as `--format csv` and `--format json`
//! print them ([`BatchWriter`]).

use std::ffi::OsStr;
use std::io::BufWriter;
use std::path::Path;

use apron_files::replace::Replacement;
use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::json;
use datafusion::parquet::arrow::ArrowWriter;
use datafusion::parquet::basic::{Compression, ZstdLevel};
use datafusion::parquet::file::properties::WriterProperties;
use datafusion::prelude::DataFrame;

use crate::error::{Error, InputError, OutputError};
use crate::output::{BatchWriter, Format};
use crate::session::Session;

/// The formats `--out` writes, by extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FileFormat {
    /// `.parquet`: zstd-compressed Parquet with the result's schema.
    Parquet,
    /// `.csv`: as `--format csv` prints.
    Csv,
    /// `.json`: one JSON array, as `--format json` prints.
    Json,
    /// `.ndjson` or `.jsonl`: one JSON object per line.
    Ndjson,
}

/// The extensions `--out` takes, in words.
const EXTENSIONS: &str = ".parquet, .csv, .json, .ndjson or .jsonl";

/// Pending rows of Parquet past which a row group is written, whatever its
/// row count: what the writer holds of a result of wide rows.
const ROW_GROUP_BYTES: usize = 64 << 20;

impl FileFormat {
    /// The format `path`'s extension names (in any case); an unknown or
    /// missing extension is refused, naming it and those taken.
    pub(crate) fn of(path: &Path) -> Result<Self, Error> {
        let extension = path.extension().and_then(OsStr::to_str).map(str::to_ascii_lowercase);
        match extension.as_deref() {
            Some("parquet") => Ok(FileFormat::Parquet),
            Some("csv") => Ok(FileFormat::Csv),
            Some("json") => Ok(FileFormat::Json),
            Some("ndjson" | "jsonl") => Ok(FileFormat::Ndjson),
            _ => Err(InputError::OutExtension {
                path: path.to_path_buf(),
                extension: path.extension().map(|e| e.to_string_lossy().into_owned()),
                accepted: EXTENSIONS,
            }
            .into()),
        }
    }
}

/// Runs `df` on `session` and writes its rows to `path` in `format` as they
/// come. When it returns `Ok`, `path` holds the whole result, synced; the
/// count is the rows written. On an error, `path` is as it was.
pub(crate) async fn write(
    session: &Session,
    df: DataFrame,
    path: &Path,
    format: FileFormat,
) -> Result<u64, Error> {
    let failed = |source: Box<dyn std::error::Error + Send + Sync>| -> Error {
        OutputError::File { path: path.to_path_buf(), source }.into()
    };
    let temp = Replacement::begin(path).map_err(|e| failed(e.into()))?;
    let mut writer = FileWriter::new(format, std::sync::Arc::clone(df.schema().inner()), temp);
    session.each_batch(df, |batch| writer.write(&batch).map_err(&failed)).await?;
    let rows = writer.rows;
    let temp = writer.finish().map_err(failed)?;
    temp.commit().map_err(|e| failed(e.into()))?;
    tracing::debug!(path = %path.display(), rows, "wrote the result");
    Ok(rows)
}

type Out = BufWriter<Replacement>;

/// The rows being written in one [`FileFormat`].
struct FileWriter {
    inner: Inner,
    rows: u64,
}

enum Inner {
    Text(BatchWriter<Out>),
    Ndjson(json::Writer<Out, json::writer::LineDelimited>),
    /// Parquet: the file until the first batch gives the schema the engine
    /// yields (which may say `Utf8View` where the plan says `Utf8`), then
    /// the writer (boxed: it is large).
    Parquet {
        pending: Option<(Out, SchemaRef)>,
        writer: Option<Box<ArrowWriter<Out>>>,
    },
}

type Failure = Box<dyn std::error::Error + Send + Sync>;

impl FileWriter {
    fn new(format: FileFormat, schema: SchemaRef, temp: Replacement) -> Self {
        let out = BufWriter::new(temp);
        let inner = match format {
            FileFormat::Csv => Inner::Text(BatchWriter::new(Format::Csv, schema, out)),
            FileFormat::Json => Inner::Text(BatchWriter::new(Format::Json, schema, out)),
            FileFormat::Ndjson => Inner::Ndjson(
                json::WriterBuilder::new()
                    .with_explicit_nulls(true)
                    .build::<_, json::writer::LineDelimited>(out),
            ),
            FileFormat::Parquet => Inner::Parquet { pending: Some((out, schema)), writer: None },
        };
        Self { inner, rows: 0 }
    }

    fn write(&mut self, batch: &RecordBatch) -> Result<(), Failure> {
        match &mut self.inner {
            Inner::Text(writer) => writer.write(batch)?,
            Inner::Ndjson(writer) => writer.write(batch)?,
            Inner::Parquet { pending, writer } => {
                let writer = match writer {
                    Some(writer) => writer,
                    None => {
                        let (out, _) = pending.take().expect("the file waits until the writer has it");
                        writer.insert(Box::new(ArrowWriter::try_new(
                            out,
                            batch.schema(),
                            Some(parquet_properties()),
                        )?))
                    }
                };
                writer.write(batch)?;
                if writer.in_progress_size() >= ROW_GROUP_BYTES {
                    writer.flush()?;
                }
            }
        }
        self.rows += batch.num_rows() as u64;
        Ok(())
    }

    /// Completes the file (the CSV header of an empty result, the JSON
    /// array's end, the Parquet footer) and flushes it.
    fn finish(self) -> Result<Replacement, Failure> {
        let out = match self.inner {
            Inner::Text(writer) => writer.finish()?,
            Inner::Ndjson(mut writer) => {
                writer.finish()?;
                writer.into_inner()
            }
            Inner::Parquet { writer: Some(writer), .. } => writer.into_inner()?,
            Inner::Parquet { pending: Some((out, schema)), writer: None } => {
                // No rows: a file of the result's columns and no row.
                ArrowWriter::try_new(out, schema, Some(parquet_properties()))?.into_inner()?
            }
            Inner::Parquet { pending: None, writer: None } => {
                return Err("the Parquet writer was lost".into());
            }
        };
        out.into_inner().map_err(|e| e.into_error().into())
    }
}

/// How `--out` writes Parquet: zstd, as apron's own files.
fn parquet_properties() -> WriterProperties {
    WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::try_new(3).expect("3 is a valid zstd level")))
        .build()
}

#[cfg(test)]
mod tests {
    use std::fs::File;
    use std::sync::Arc;

    use datafusion::arrow::array::{ArrayRef, Int64Array, StringArray};
    use datafusion::arrow::datatypes::{DataType, Field, Schema};
    use datafusion::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

    use super::*;

    #[test]
    fn the_extension_chooses_the_format() {
        for (name, format) in [
            ("a.parquet", FileFormat::Parquet),
            ("dir/a.CSV", FileFormat::Csv),
            ("a.json", FileFormat::Json),
            ("a.ndjson", FileFormat::Ndjson),
            ("a.jsonl", FileFormat::Ndjson),
        ] {
            assert_eq!(FileFormat::of(Path::new(name)).expect("known"), format, "{name}");
        }
        let err = FileFormat::of(Path::new("a.xlsx")).expect_err("unknown");
        assert_eq!(err.to_string(), format!("--out a.xlsx: unknown extension .xlsx; it takes {EXTENSIONS}"));
        let err = FileFormat::of(Path::new("result")).expect_err("none");
        assert_eq!(err.to_string(), format!("--out result: no extension; it takes {EXTENSIONS}"));
    }

    fn batch(from: i64, rows: i64) -> RecordBatch {
        let schema = Arc::new(Schema::new(vec![
            Field::new("n", DataType::Int64, false),
            Field::new("s", DataType::Utf8, true),
        ]));
        let columns: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from((from..from + rows).collect::<Vec<_>>())),
            Arc::new(StringArray::from(
                (from..from + rows).map(|i| Some(format!("row {i}"))).collect::<Vec<_>>(),
            )),
        ];
        RecordBatch::try_new(schema, columns).expect("columns match")
    }

    #[test]
    fn parquet_rows_reach_the_file_as_they_come() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("r.parquet");
        let temp = Replacement::begin(&path).expect("temp file");
        let temp_path = temp.temp_path().to_path_buf();
        assert!(temp_path.file_name().is_some_and(|n| n.to_string_lossy().starts_with(".r.parquet.")));
        let mut writer = FileWriter::new(FileFormat::Parquet, batch(0, 0).schema(), temp);
        // Rows of some 200 bytes each: a row group is written once the
        // pending ones pass ROW_GROUP_BYTES, before the result ends.
        let wide = |from: i64| {
            let b = batch(from, 10_000);
            let s: ArrayRef = Arc::new(StringArray::from(
                (0..10_000).map(|i| Some(format!("{i:0>200}"))).collect::<Vec<_>>(),
            ));
            RecordBatch::try_new(b.schema(), vec![Arc::clone(b.column(0)), s]).expect("columns match")
        };
        let mut batches = 0;
        while std::fs::metadata(&temp_path).expect("the temp file").len() < 1 << 20 {
            writer.write(&wide(batches * 10_000)).expect("writes");
            batches += 1;
            assert!(batches < 1_000, "nothing reached the file");
        }
        let rows = writer.rows;
        let temp = writer.finish().expect("finishes");
        temp.commit().expect("commits");
        let reader = ParquetRecordBatchReaderBuilder::try_new(File::open(&path).expect("open"))
            .expect("a Parquet file")
            .build()
            .expect("a reader");
        let read: usize = reader.map(|b| b.expect("a batch").num_rows()).sum();
        assert_eq!(read as u64, rows);
        assert_eq!(rows, batches as u64 * 10_000);
    }

    #[test]
    fn an_empty_result_is_a_file_of_its_columns() {
        let dir = tempfile::tempdir().expect("tempdir");
        for (name, format, text) in [
            ("e.csv", FileFormat::Csv, Some("n,s\n")),
            ("e.json", FileFormat::Json, Some("[]\n")),
            ("e.ndjson", FileFormat::Ndjson, Some("")),
            ("e.parquet", FileFormat::Parquet, None),
        ] {
            let path = dir.path().join(name);
            let writer =
                FileWriter::new(format, batch(0, 0).schema(), Replacement::begin(&path).expect("temp"));
            writer.finish().expect("finishes").commit().expect("commits");
            match text {
                Some(text) => assert_eq!(std::fs::read_to_string(&path).expect("read"), text, "{name}"),
                None => {
                    let builder = ParquetRecordBatchReaderBuilder::try_new(File::open(&path).expect("open"))
                        .expect("a Parquet file");
                    let names: Vec<_> = builder.schema().fields().iter().map(|f| f.name().clone()).collect();
                    assert_eq!(names, ["n", "s"]);
                    assert_eq!(builder.metadata().file_metadata().num_rows(), 0);
                }
            }
        }
    }

    #[test]
    fn ndjson_is_one_object_per_line() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("r.jsonl");
        let mut writer = FileWriter::new(
            FileFormat::Ndjson,
            batch(0, 0).schema(),
            Replacement::begin(&path).expect("temp"),
        );
        writer.write(&batch(1, 2)).expect("writes");
        writer.finish().expect("finishes").commit().expect("commits");
        assert_eq!(
            std::fs::read_to_string(&path).expect("read"),
            "{\"n\":1,\"s\":\"row 1\"}\n{\"n\":2,\"s\":\"row 2\"}\n"
        );
    }
}
