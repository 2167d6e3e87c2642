//! The schema every table is queried with: its file columns (from
//! `apron_schemas`), then the Hive partition columns its folders add. The
//! session registers tables with it; the integrity check and the minutes
//! computed from raw files read it too.

use std::sync::Arc;

use apron_schemas::Table;
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};

/// The Hive partition columns of every table, in folder order, with the
/// types their values are parsed into.
pub fn partition_columns() -> Vec<(String, DataType)> {
    vec![("date".to_owned(), DataType::Date32), ("host".to_owned(), DataType::Utf8)]
}

/// The schema a table is queried with: its file columns, then the
/// partition columns.
pub(crate) fn full_schema(table: Table) -> SchemaRef {
    let mut fields: Vec<_> = table.schema().fields().iter().cloned().collect();
    for (name, data_type) in partition_columns() {
        fields.push(Arc::new(Field::new(name, data_type, true)));
    }
    Arc::new(Schema::new(fields))
}
