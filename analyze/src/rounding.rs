//! Rounding for print: money to the cent in a way that keeps sums, other
//! figures to a fixed number of decimals.
//!
//! A report whose rows add up to a total must still add up once printed:
//! [`cents_keeping_total`] rounds each amount to the cent so that the
//! rounded amounts sum to the rounded total exactly (largest remainder).

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, Float64Array, RecordBatch};
use datafusion::arrow::datatypes::Float64Type;
use datafusion::arrow::error::ArrowError;

/// Each of `amounts` in whole cents, rounded so that they sum to the sum of
/// `amounts` rounded to the cent: every amount is rounded down, and the
/// cents left over go one each to the amounts with the largest remainders
/// (ties to the earlier one).
pub fn cents_keeping_total(amounts: &[f64]) -> Vec<i64> {
    let exact: Vec<f64> = amounts.iter().map(|a| a * 100.0).collect();
    let total = exact.iter().sum::<f64>().round() as i64;
    let mut cents: Vec<i64> = exact.iter().map(|c| c.floor() as i64).collect();
    let left = total - cents.iter().sum::<i64>();
    let mut by_remainder: Vec<usize> = (0..exact.len()).collect();
    by_remainder.sort_by(|&a, &b| (exact[b] - exact[b].floor()).total_cmp(&(exact[a] - exact[a].floor())));
    for &i in by_remainder.iter().cycle().take(usize::try_from(left.max(0)).unwrap_or(0)) {
        cents[i] += 1;
    }
    cents
}

/// `x` rounded to `decimals` decimals.
pub fn round_to(x: f64, decimals: i32) -> f64 {
    let scale = 10f64.powi(decimals);
    (x * scale).round() / scale
}

/// `batch` with each named Float64 column rounded to its decimals. Columns
/// not named, or not Float64, are kept as they are.
pub fn round_columns(batch: &RecordBatch, decimals: &[(&str, i32)]) -> Result<RecordBatch, ArrowError> {
    let schema = batch.schema();
    let columns: Vec<ArrayRef> = schema
        .fields()
        .iter()
        .zip(batch.columns())
        .map(|(field, column)| {
            let wanted = decimals.iter().find(|(name, _)| name == field.name());
            match (wanted, column.as_primitive_opt::<Float64Type>()) {
                (Some((_, d)), Some(values)) => {
                    let rounded: Float64Array = values.iter().map(|v| v.map(|v| round_to(v, *d))).collect();
                    Arc::new(rounded) as ArrayRef
                }
                _ => Arc::clone(column),
            }
        })
        .collect();
    RecordBatch::try_new(schema, columns)
}

/// The values of the Float64 column `name` of `batch` (null as 0).
pub fn f64_column(batch: &RecordBatch, name: &str) -> Vec<f64> {
    batch
        .column_by_name(name)
        .and_then(|c| c.as_primitive_opt::<Float64Type>())
        .map(|c| (0..c.len()).map(|i| if c.is_valid(i) { c.value(i) } else { 0.0 }).collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounded_cents_add_up_to_the_rounded_total() {
        // Three thirds of a dollar: 33 + 33 + 34 cents, not 33 × 3.
        assert_eq!(cents_keeping_total(&[1.0 / 3.0; 3]), vec![34, 33, 33]);
        let amounts = [10.004, 20.004, 30.004, 0.0];
        let cents = cents_keeping_total(&amounts);
        assert_eq!(cents.iter().sum::<i64>(), 6001);
        assert_eq!(cents, vec![1000, 2000, 3001, 0]);
        assert_eq!(cents_keeping_total(&[]), Vec::<i64>::new());
    }

    #[test]
    fn many_small_amounts_still_sum() {
        let amounts: Vec<f64> = (0..1000).map(|i| f64::from(i) * 0.001_7 + 0.003).collect();
        let total = (amounts.iter().sum::<f64>() * 100.0).round() as i64;
        assert_eq!(cents_keeping_total(&amounts).iter().sum::<i64>(), total);
    }
}
