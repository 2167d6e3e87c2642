//! A query result's columns by name: read whatever physical string type the
//! engine chose (`Utf8`, `LargeUtf8`, `Utf8View`), or replaced.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, Float64Array, RecordBatch};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Float64Type};
use datafusion::arrow::error::ArrowError;

/// The values of the Float64 column `name` of `batch` (null as 0).
pub fn f64_column(batch: &RecordBatch, name: &str) -> Vec<f64> {
    batch
        .column_by_name(name)
        .and_then(|c| c.as_primitive_opt::<Float64Type>())
        .map(|c| (0..c.len()).map(|i| if c.is_valid(i) { c.value(i) } else { 0.0 }).collect())
        .unwrap_or_default()
}

/// The values of column `name` of `batch` as text (`None` for null); empty
/// when the column is missing or is not text.
pub fn text_column(batch: &RecordBatch, name: &str) -> Vec<Option<String>> {
    let Some(column) = batch.column_by_name(name) else { return Vec::new() };
    let Ok(text) = cast(column, &DataType::Utf8) else { return Vec::new() };
    text.as_string::<i32>().iter().map(|v| v.map(str::to_owned)).collect()
}

/// Every string of `array` (any string type), nulls left out.
pub fn strings(array: &dyn Array) -> Vec<String> {
    match cast(array, &DataType::Utf8) {
        Ok(text) => text.as_string::<i32>().iter().flatten().map(str::to_owned).collect(),
        Err(_) => Vec::new(),
    }
}

/// `batch` with the Float64 column `name` replaced by `values`.
pub fn replace_f64(batch: &RecordBatch, name: &str, values: Vec<f64>) -> Result<RecordBatch, ArrowError> {
    let index = batch.schema().index_of(name)?;
    let mut columns: Vec<ArrayRef> = batch.columns().to_vec();
    columns[index] = Arc::new(Float64Array::from(values));
    RecordBatch::try_new(batch.schema(), columns)
}
