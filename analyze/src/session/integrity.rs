//! Finds the data file that broke a query.
//!
//! DataFusion's errors for a truncated or damaged Parquet file seldom name
//! the file. When a query fails while running, [`find_bad_file`] (every file
//! of the folder) or [`find_bad_file_among`] (the files the query read)
//! checks the data files as the engine lists them (`DATA/<table>/date=…/
//! host=…/*.parquet`, hidden files skipped, see [`apron_schemas::paths::is_data_file_name`]):
//! that each is not empty and has a readable footer, page index and
//! schema, and every column the table requires, with a type that casts to
//! the table's. That reads metadata only, so it is cheap enough to run over
//! the whole folder. A file whose metadata is sound but whose pages are
//! damaged is found by [`find_undecodable`], which decodes every row of the
//! files it is given (the session gives it the files the failed query read).

use std::fs::File;
use std::path::{Path, PathBuf};

use apron_schemas::folders::{self, subfolders};
use apron_schemas::{DataLayout, Table};
use datafusion::arrow::compute::can_cast_types;
use datafusion::arrow::datatypes::{DataType, Schema};
use datafusion::common::ScalarValue;
use datafusion::parquet::arrow::arrow_reader::{ArrowReaderOptions, ParquetRecordBatchReaderBuilder};
use datafusion::parquet::arrow::parquet_to_arrow_schema;
use datafusion::parquet::errors::ParquetError;
use datafusion::parquet::file::metadata::{PageIndexPolicy, ParquetMetaDataReader};

use crate::error::SessionError;
use crate::session::table_schema::partition_columns;

/// The first bad file of `tables` under `layout`, in path order, as the
/// error to report; `None` when every footer, page index and schema is
/// sound. A partition folder whose value the engine cannot parse
/// (`date=yesterday`) is reported before any file.
pub fn find_bad_file(layout: &DataLayout, tables: &[Table]) -> Option<SessionError> {
    tables.iter().find_map(|&table| {
        let table_dir = layout.table_dir(table);
        bad_partition(&table_dir)
            .or_else(|| data_files(&table_dir).into_iter().find_map(|path| check_file(&path, table)))
    })
}

/// The first partition folder of `table_dir` (in path order) whose value
/// does not parse as its column's type, as [`SessionError::BadPartition`].
fn bad_partition(table_dir: &Path) -> Option<SessionError> {
    let columns = partition_columns();
    let mut level = vec![table_dir.to_path_buf()];
    for (column, data_type) in &columns {
        let mut next: Vec<PathBuf> = level.iter().flat_map(|dir| partition_dirs(dir)).collect();
        next.sort();
        for dir in &next {
            let name = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            let Some(value) = name.strip_prefix(column.as_str()).and_then(|v| v.strip_prefix('=')) else {
                continue;
            };
            if ScalarValue::try_from_string(value.to_owned(), data_type).is_err() {
                return Some(SessionError::BadPartition {
                    path: dir.clone(),
                    column: column.clone(),
                    value: value.to_owned(),
                    wanted: match data_type {
                        DataType::Date32 => "date (YYYY-MM-DD)".to_owned(),
                        other => other.to_string(),
                    },
                });
            }
        }
        level = next;
    }
    None
}

/// [`find_bad_file`] for the given files of `layout` only (`DATA/<table>/…`;
/// a file outside a known table's folder is skipped).
pub fn find_bad_file_among(layout: &DataLayout, files: &[PathBuf]) -> Option<SessionError> {
    files.iter().find_map(|path| {
        let table = path
            .strip_prefix(layout.root())
            .ok()
            .and_then(|rel| rel.components().next())
            .and_then(|first| Table::from_name(&first.as_os_str().to_string_lossy()))?;
        check_file(path, table)
    })
}

/// The first of `files` whose rows do not decode, as the error to report;
/// `None` when all of them decode. Stops at the first damaged file.
pub fn find_undecodable(files: &[PathBuf]) -> Option<SessionError> {
    files.iter().find_map(|path| {
        let corrupt = |source: ParquetError| SessionError::CorruptFile { path: path.clone(), source };
        let file = match File::open(path) {
            Ok(file) => file,
            Err(e) => return Some(corrupt(ParquetError::External(Box::new(e)))),
        };
        let options = ArrowReaderOptions::new().with_page_index_policy(PageIndexPolicy::Optional);
        let reader = match ParquetRecordBatchReaderBuilder::try_new_with_options(file, options)
            .and_then(|b| b.build())
        {
            Ok(reader) => reader,
            Err(e) => return Some(corrupt(e)),
        };
        for batch in reader {
            if let Err(e) = batch {
                return Some(corrupt(ParquetError::ArrowError(e.to_string())));
            }
        }
        None
    })
}

/// The data files of one table folder, sorted: the non-hidden
/// `*.parquet` files (empty ones too: they are bad files) two partition levels (`key=value`) below it.
fn data_files(table_dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for date_dir in partition_dirs(table_dir) {
        for host_dir in partition_dirs(&date_dir) {
            files.extend(folders::data_files(&host_dir).into_iter().map(|(_, path)| path));
        }
    }
    files.sort();
    files
}

/// The `key=value` sub-folders of `dir`; none when it cannot be read.
fn partition_dirs(dir: &Path) -> Vec<PathBuf> {
    let found = subfolders(dir).ok().flatten().unwrap_or_default();
    found.into_iter().filter(|(name, _)| name.contains('=')).map(|(_, path)| path).collect()
}

/// What is wrong with the file at `path` of `table`, if anything.
fn check_file(path: &Path, table: Table) -> Option<SessionError> {
    let corrupt = |source: ParquetError| SessionError::CorruptFile { path: path.to_path_buf(), source };
    let file = match File::open(path) {
        Ok(file) => file,
        Err(e) => return Some(corrupt(ParquetError::External(Box::new(e)))),
    };
    if file.metadata().is_ok_and(|m| m.len() == 0) {
        return Some(SessionError::EmptyFile { path: path.to_path_buf() });
    }
    // The page index too: the engine reads it to plan, and it lies outside
    // the footer.
    let reader = ParquetMetaDataReader::new().with_page_index_policy(PageIndexPolicy::Optional);
    let metadata = match reader.parse_and_finish(&file) {
        Ok(metadata) => metadata,
        Err(e) => return Some(corrupt(e)),
    };
    let file_meta = metadata.file_metadata();
    let schema = match parquet_to_arrow_schema(file_meta.schema_descr(), file_meta.key_value_metadata()) {
        Ok(schema) => schema,
        Err(e) => return Some(corrupt(e)),
    };
    schema_problem(path, &schema, table)
}

/// A column `table` requires that the file's `schema` lacks, or has with a
/// type that does not cast to the table's.
pub(crate) fn schema_problem(path: &Path, schema: &Schema, table: Table) -> Option<SessionError> {
    let wanted = table.schema();
    wanted.fields().iter().find_map(|field| match schema.field_with_name(field.name()) {
        Err(_) if !field.is_nullable() => {
            Some(SessionError::MissingColumn { path: path.to_path_buf(), column: field.name().clone() })
        }
        Err(_) => None,
        Ok(found) if !can_cast_types(found.data_type(), field.data_type()) => {
            Some(SessionError::ColumnType {
                path: path.to_path_buf(),
                column: field.name().clone(),
                found: found.data_type().to_string(),
                wanted: field.data_type().to_string(),
            })
        }
        Ok(_) => None,
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use datafusion::arrow::array::{ArrayRef, Int32Array, RecordBatch};
    use datafusion::arrow::datatypes::Field;
    use datafusion::parquet::arrow::ArrowWriter;

    use super::*;

    fn write(path: &Path, batch: &RecordBatch) {
        std::fs::create_dir_all(path.parent().expect("has a parent")).expect("mkdir");
        let file = File::create(path).expect("create");
        let mut writer = ArrowWriter::try_new(file, batch.schema(), None).expect("writer");
        writer.write(batch).expect("write");
        writer.close().expect("close");
    }

    #[test]
    fn names_truncated_files_and_missing_columns_and_skips_hidden_ones() {
        let dir = tempfile::tempdir().expect("tempdir");
        let layout = DataLayout::new(dir.path());
        let part = layout.partition_dir(
            Table::GpuSamples,
            chrono::NaiveDate::from_ymd_opt(2026, 11, 30).expect("valid date"),
            "node07",
        );
        let good = apron_schemas::gpu_samples::to_batch(&[]).expect("empty batch");
        write(&part.join("a.parquet"), &good);
        std::fs::write(part.join(".b.parquet.tmp"), b"not parquet").expect("write tmp");
        std::fs::write(part.join(".c.parquet"), b"hidden").expect("write hidden");
        assert!(find_bad_file(&layout, &[Table::GpuSamples]).is_none());
        std::fs::write(part.join("d.parquet"), b"").expect("write empty");
        match find_bad_file(&layout, &[Table::GpuSamples]) {
            Some(SessionError::EmptyFile { path }) => assert_eq!(path, part.join("d.parquet")),
            other => panic!("expected an empty file, got {other:?}"),
        }
        std::fs::remove_file(part.join("d.parquet")).expect("rm");

        std::fs::write(part.join("b.parquet"), b"PAR1 truncated").expect("write bad");
        match find_bad_file(&layout, &Table::ALL) {
            Some(SessionError::CorruptFile { path, .. }) => assert_eq!(path, part.join("b.parquet")),
            other => panic!("expected a corrupt file, got {other:?}"),
        }
        std::fs::remove_file(part.join("b.parquet")).expect("rm");

        let odd = layout.table_dir(Table::GpuSamples).join("date=yesterday").join("host=x");
        std::fs::create_dir_all(&odd).expect("mkdir");
        match find_bad_file(&layout, &Table::ALL) {
            Some(err @ SessionError::BadPartition { .. }) => assert_eq!(
                err.to_string(),
                format!(
                    "cannot read partition folder {}: date=yesterday is not a date (YYYY-MM-DD)",
                    odd.parent().expect("parent").display()
                )
            ),
            other => panic!("expected a bad partition, got {other:?}"),
        }
        std::fs::remove_dir_all(odd.parent().expect("parent")).expect("rm");

        let schema = Arc::new(Schema::new(vec![Field::new("gpu_index", DataType::Int32, false)]));
        let columns: Vec<ArrayRef> = vec![Arc::new(Int32Array::from(vec![1]))];
        let batch = RecordBatch::try_new(schema, columns).expect("batch");
        write(&part.join("c.parquet"), &batch);
        match find_bad_file(&layout, &Table::ALL) {
            Some(SessionError::MissingColumn { path, column }) => {
                assert_eq!(path, part.join("c.parquet"));
                assert_eq!(column, "ts");
            }
            other => panic!("expected a missing column, got {other:?}"),
        }
    }
}
