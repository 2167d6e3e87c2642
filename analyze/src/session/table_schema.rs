//! The schema every table is queried with: its file columns (from
//! `apron_schemas`), then the Hive partition columns its folders add. The
//! session registers tables with it; the integrity check and the minutes
//! computed from raw files read it too.
//!
//! Every text column is queried as `Utf8View`, whatever the files say: the
//! Parquet reader then points at the decoded dictionary instead of copying
//! every value (a `gpu_uuid` is 40 bytes, repeated on every row), and
//! grouping by it compares views. On a month of 64 GPUs (166 M rows,
//! `bench/`): reading `gpu_uuid` alone took 0.47 s of CPU instead of
//! 1.14 s, the top users by memory-hours over `proc_samples` a third less.
//! The minute tables followed (issue 39): the ledger reads a month of them
//! a slice at a time and numbers each text value, and with views a row
//! whose view equals the row before's is numbered without reading its text
//! (`crate::ledger::read`); the text the ledger's pass took went from
//! 62.7 s to 35.7 s at 4,096 GPUs. Views keep the pages they point into
//! alive while a result is held: `apron report`'s peak memory at 64 GPUs
//! was unchanged (353 against 357 MiB).

use std::sync::Arc;

use apron_schemas::Table;
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};

/// The Hive partition columns of every table, in folder order, with the
/// types their values are parsed into.
pub fn partition_columns() -> Vec<(String, DataType)> {
    vec![("date".to_owned(), DataType::Date32), ("host".to_owned(), DataType::Utf8)]
}

/// The file columns of `table` as a query reads them: the stored schema,
/// with every `Utf8` column as `Utf8View`.
pub(crate) fn file_schema(table: Table) -> SchemaRef {
    let fields: Vec<_> = table
        .schema()
        .fields()
        .iter()
        .map(|f| match f.data_type() {
            DataType::Utf8 => Arc::new(f.as_ref().clone().with_data_type(DataType::Utf8View)),
            _ => Arc::clone(f),
        })
        .collect();
    Arc::new(Schema::new(fields))
}

/// The schema a table is queried with: its file columns
/// ([`file_schema`]), then the partition columns.
pub(crate) fn full_schema(table: Table) -> SchemaRef {
    let mut fields: Vec<_> = file_schema(table).fields().iter().cloned().collect();
    for (name, data_type) in partition_columns() {
        fields.push(Arc::new(Field::new(name, data_type, true)));
    }
    Arc::new(Schema::new(fields))
}
