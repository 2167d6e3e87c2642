//! A query result's columns by name, and typed columns back into a batch.
//!
//! Reading: [`Columns`] gives each column of a result as a `Vec` of one Rust
//! type, whatever physical type the engine chose (`Utf8`, `LargeUtf8`,
//! `Utf8View`; any integer width), and fails naming the column when it is
//! missing, does not convert, or holds a null where none may be. The loose
//! readers ([`text_column`], [`strings`]) serve code that reads a result it
//! only glances at.
//!
//! Building: [`batch_of`] and the array constructors ([`text`], [`float`],
//! …) turn typed rows back into the batch [`crate::output`] prints, each
//! field carrying its column's kind ([`kinded`]) from the report's column
//! table. What the rows mean is each figure's business
//! (`crate::report::figures`).

use std::sync::Arc;

use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, BooleanArray, Float64Array, Int32Array, Int64Array, PrimitiveArray,
    RecordBatch, StringArray, TimestampMillisecondArray, UInt32Array,
};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{
    ArrowPrimitiveType, DataType, Date32Type, Field, Float64Type, Int32Type, Int64Type, Schema,
    TimestampMillisecondType,
};
use datafusion::arrow::error::ArrowError;

/// The columns of one query result, read by name into Rust values.
#[derive(Debug, Clone, Copy)]
pub struct Columns<'a> {
    batch: &'a RecordBatch,
}

impl<'a> Columns<'a> {
    /// The columns of `batch`.
    pub fn of(batch: &'a RecordBatch) -> Self {
        Self { batch }
    }

    /// Rows in the result.
    pub fn len(&self) -> usize {
        self.batch.num_rows()
    }

    /// Whether the result has no rows.
    pub fn is_empty(&self) -> bool {
        self.batch.num_rows() == 0
    }

    /// Column `name` converted to `to`.
    fn converted(&self, name: &str, to: &DataType) -> Result<ArrayRef, ArrowError> {
        let column = self
            .batch
            .column_by_name(name)
            .ok_or_else(|| ArrowError::SchemaError(format!("the result has no column {name}")))?;
        cast(column, to).map_err(|e| ArrowError::CastError(format!("column {name}: {e}")))
    }

    /// The values of the numeric or time column `name` as `T` (`None` for
    /// null).
    fn primitive<T: ArrowPrimitiveType>(&self, name: &str) -> Result<Vec<Option<T::Native>>, ArrowError> {
        let array = self.converted(name, &T::DATA_TYPE)?;
        let array: &PrimitiveArray<T> = array.as_primitive();
        Ok(array.iter().collect())
    }

    /// Text column `name` (`None` for null).
    pub fn text_opt(&self, name: &str) -> Result<Vec<Option<String>>, ArrowError> {
        let array = self.converted(name, &DataType::Utf8)?;
        Ok(array.as_string::<i32>().iter().map(|v| v.map(str::to_owned)).collect())
    }

    /// Text column `name`, which holds no null.
    pub fn text(&self, name: &str) -> Result<Vec<String>, ArrowError> {
        required(name, self.text_opt(name)?)
    }

    /// Float column `name` (`None` for null).
    pub fn f64_opt(&self, name: &str) -> Result<Vec<Option<f64>>, ArrowError> {
        self.primitive::<Float64Type>(name)
    }

    /// Float column `name`, which holds no null.
    pub fn f64(&self, name: &str) -> Result<Vec<f64>, ArrowError> {
        required(name, self.f64_opt(name)?)
    }

    /// Integer column `name` as `i32` (`None` for null).
    pub fn i32_opt(&self, name: &str) -> Result<Vec<Option<i32>>, ArrowError> {
        self.primitive::<Int32Type>(name)
    }

    /// Integer column `name` as `i32`, which holds no null.
    pub fn i32(&self, name: &str) -> Result<Vec<i32>, ArrowError> {
        required(name, self.i32_opt(name)?)
    }

    /// Integer column `name` as `i64` (`None` for null).
    pub fn i64_opt(&self, name: &str) -> Result<Vec<Option<i64>>, ArrowError> {
        self.primitive::<Int64Type>(name)
    }

    /// Integer column `name` as `i64`, which holds no null.
    pub fn i64(&self, name: &str) -> Result<Vec<i64>, ArrowError> {
        required(name, self.i64_opt(name)?)
    }

    /// Boolean column `name`, which holds no null.
    pub fn bool(&self, name: &str) -> Result<Vec<bool>, ArrowError> {
        let array = self.converted(name, &DataType::Boolean)?;
        required(name, array.as_boolean().iter().collect())
    }

    /// Timestamp column `name` in milliseconds since the epoch (`None` for
    /// null).
    pub fn timestamp_ms_opt(&self, name: &str) -> Result<Vec<Option<i64>>, ArrowError> {
        self.primitive::<TimestampMillisecondType>(name)
    }

    /// Timestamp column `name` in milliseconds since the epoch, which holds
    /// no null.
    pub fn timestamp_ms(&self, name: &str) -> Result<Vec<i64>, ArrowError> {
        required(name, self.timestamp_ms_opt(name)?)
    }

    /// Date column `name` in days since the epoch, which holds no null.
    pub fn date32(&self, name: &str) -> Result<Vec<i32>, ArrowError> {
        required(name, self.primitive::<Date32Type>(name)?)
    }
}

/// `values` without their `Option`s, or an error naming column `name` and
/// the first row that is null.
fn required<T>(name: &str, values: Vec<Option<T>>) -> Result<Vec<T>, ArrowError> {
    values
        .into_iter()
        .enumerate()
        .map(|(row, v)| {
            v.ok_or_else(|| ArrowError::InvalidArgumentError(format!("column {name} is null in row {row}")))
        })
        .collect()
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

/// A batch of `columns` (name, values), in that order. Every field may hold
/// nulls: the printed form does not show it, and a figure's rows say
/// themselves which values may be missing. Each field carries its column's
/// kind ([`kinded`]).
pub fn batch_of(columns: Vec<(&str, ArrayRef)>) -> Result<RecordBatch, ArrowError> {
    let fields: Vec<Field> = columns
        .iter()
        .map(|(name, values)| kinded(Field::new(*name, values.data_type().clone(), true)))
        .collect();
    let arrays = columns.into_iter().map(|(_, values)| values).collect();
    RecordBatch::try_new(Arc::new(Schema::new(fields)), arrays)
}

/// `field` with its column's kind as metadata ([`apron_reports::KIND_KEY`]:
/// `money`, `percent`, …) as the report's column table states it
/// ([`apron_reports::COLUMNS`], the one place a column's kind is said), so
/// the terminal shows a column as the page does; a column not in that
/// table (a query's, not a figure's) is left without.
pub fn kinded(field: Field) -> Field {
    match apron_reports::column(field.name()) {
        Some(column) => field.with_metadata(
            [(apron_reports::KIND_KEY.to_owned(), column.kind.name().to_owned())].into_iter().collect(),
        ),
        None => field,
    }
}

/// A text column (`Utf8`).
pub fn text<'a, V: Into<Option<&'a str>>>(values: impl IntoIterator<Item = V>) -> ArrayRef {
    Arc::new(values.into_iter().map(Into::into).collect::<StringArray>())
}

/// A `Float64` column.
pub fn float<V: Into<Option<f64>>>(values: impl IntoIterator<Item = V>) -> ArrayRef {
    Arc::new(values.into_iter().map(Into::into).collect::<Float64Array>())
}

/// An `Int32` column.
pub fn int32<V: Into<Option<i32>>>(values: impl IntoIterator<Item = V>) -> ArrayRef {
    Arc::new(values.into_iter().map(Into::into).collect::<Int32Array>())
}

/// An `Int64` column.
pub fn int64<V: Into<Option<i64>>>(values: impl IntoIterator<Item = V>) -> ArrayRef {
    Arc::new(values.into_iter().map(Into::into).collect::<Int64Array>())
}

/// A `UInt32` column.
pub fn uint32<V: Into<Option<u32>>>(values: impl IntoIterator<Item = V>) -> ArrayRef {
    Arc::new(values.into_iter().map(Into::into).collect::<UInt32Array>())
}

/// A `Boolean` column.
pub fn boolean<V: Into<Option<bool>>>(values: impl IntoIterator<Item = V>) -> ArrayRef {
    Arc::new(values.into_iter().map(Into::into).collect::<BooleanArray>())
}

/// A `Timestamp(ms, "UTC")` column from milliseconds since the epoch.
pub fn timestamp_ms<V: Into<Option<i64>>>(values: impl IntoIterator<Item = V>) -> ArrayRef {
    let values: TimestampMillisecondArray = values.into_iter().map(Into::into).collect();
    Arc::new(values.with_timezone("UTC"))
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::array::StringViewArray;

    use super::*;

    #[test]
    fn columns_read_any_width_and_name_what_is_wrong() {
        let batch = RecordBatch::try_from_iter([
            ("name", Arc::new(StringViewArray::from(vec![Some("a"), None])) as ArrayRef),
            ("n", int32([Some(7), Some(-1)])),
            ("x", float([Some(1.5), None])),
        ])
        .expect("columns match");
        let c = Columns::of(&batch);
        assert_eq!(c.text_opt("name").expect("text"), [Some("a".to_owned()), None]);
        assert_eq!(c.i64("n").expect("widens"), [7, -1]);
        assert_eq!(c.f64_opt("x").expect("floats"), [Some(1.5), None]);
        let null = c.f64("x").expect_err("a null where none may be").to_string();
        assert!(null.contains("column x is null in row 1"), "{null}");
        let missing = c.f64("y").expect_err("no such column").to_string();
        assert!(missing.contains("no column y"), "{missing}");
    }

    #[test]
    fn built_batches_keep_names_order_and_types() {
        let batch = batch_of(vec![
            ("t", timestamp_ms([Some(0), None])),
            ("flag", boolean([true, false])),
            ("u", uint32([1, 2])),
            ("s", text(["x", "y"])),
        ])
        .expect("same lengths");
        let schema = batch.schema();
        let names: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
        assert_eq!(names, ["t", "flag", "u", "s"]);
        assert_eq!(
            batch.schema().field(0).data_type(),
            &DataType::Timestamp(datafusion::arrow::datatypes::TimeUnit::Millisecond, Some("UTC".into()))
        );
        assert_eq!(Columns::of(&batch).timestamp_ms_opt("t").expect("times"), [Some(0), None]);
        assert!(batch_of(vec![("a", int64([1])), ("b", int64([1, 2]))]).is_err(), "lengths differ");
    }

    #[test]
    fn built_fields_carry_the_kind_the_column_table_states() {
        let batch = batch_of(vec![("worth", float([1.0])), ("share_pct", float([1.0])), ("n", int64([1]))])
            .expect("same lengths");
        let kind = |i: usize| batch.schema().field(i).metadata().get(apron_reports::KIND_KEY).cloned();
        assert_eq!(kind(0).as_deref(), Some("money"));
        assert_eq!(kind(1).as_deref(), Some("percent"));
        assert_eq!(kind(2), None, "a column the table does not know carries no kind");
    }
}
