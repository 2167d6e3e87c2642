//! The schema every table is queried with: its file columns (from
//! `apron_schemas`), then the Hive partition columns its folders add. The
//! session registers tables with it; the integrity check and the minutes
//! computed from raw files read it too.
//!
//! The text columns of the raw tables (`gpu_samples`, `proc_samples`) are
//! queried as `Utf8View`, whatever the files say: the Parquet reader then
//! points at the decoded dictionary instead of copying every value (a
//! `gpu_uuid` is 40 bytes, repeated on every row), and grouping by it
//! compares views. On a month of 64 GPUs (166 M rows, `bench/`): reading
//! `gpu_uuid` alone took 0.47 s of CPU instead of 1.14 s, the top users by
//! memory-hours over `proc_samples` a third less. The minute tables, which
//! the reports read and partly hold in memory, keep `Utf8`: views keep the
//! pages they point into alive. The ledger alone reads them as views
//! ([`ledger_file_schema`]), through a context of its own.

use std::sync::Arc;

use apron_schemas::Table;
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};

/// The Hive partition columns of every table, in folder order, with the
/// types their values are parsed into.
pub fn partition_columns() -> Vec<(String, DataType)> {
    vec![("date".to_owned(), DataType::Date32), ("host".to_owned(), DataType::Utf8)]
}

/// The file columns of `table` as a query reads them: the stored schema,
/// for the raw tables with every `Utf8` column as `Utf8View`.
pub(crate) fn file_schema(table: Table) -> SchemaRef {
    if !matches!(table, Table::GpuSamples | Table::ProcSamples) {
        return table.schema();
    }
    views(&table.schema())
}

/// `schema` with every `Utf8` column as `Utf8View`.
fn views(schema: &Schema) -> SchemaRef {
    let fields: Vec<_> = schema
        .fields()
        .iter()
        .map(|f| match f.data_type() {
            DataType::Utf8 => Arc::new(f.as_ref().clone().with_data_type(DataType::Utf8View)),
            _ => Arc::clone(f),
        })
        .collect();
    Arc::new(Schema::new(fields))
}

/// The file columns of a minute table as the ledger reads them: every
/// `Utf8` column as `Utf8View`, which the other queries of the minute
/// tables do not (see above). The ledger numbers each value as it reads a
/// batch and keeps nothing of it, so no page is held alive; and the reader
/// no longer copies every value out of the dictionary, nor does the ledger
/// compare each row's text with the row before's (64 GPUs' month, `spend`:
/// 4.3 s of CPU became 3.7 s, the same output).
pub(crate) fn ledger_file_schema(table: Table) -> SchemaRef {
    views(&table.schema())
}

/// [`full_schema`] of [`ledger_file_schema`].
pub(crate) fn ledger_full_schema(table: Table) -> SchemaRef {
    with_partitions(&ledger_file_schema(table))
}

/// The schema a table is queried with: its file columns
/// ([`file_schema`]), then the partition columns.
pub(crate) fn full_schema(table: Table) -> SchemaRef {
    with_partitions(&file_schema(table))
}

/// `file_columns`, then the partition columns.
fn with_partitions(file_columns: &Schema) -> SchemaRef {
    let mut fields: Vec<_> = file_columns.fields().iter().cloned().collect();
    for (name, data_type) in partition_columns() {
        fields.push(Arc::new(Field::new(name, data_type, true)));
    }
    Arc::new(Schema::new(fields))
}
