//! Rounding for print: money to the cent in a way that keeps sums, other
//! figures to a fixed number of decimals.
//!
//! A report whose rows add up to a total must still add up once printed:
//! [`cents_keeping_total`] rounds each amount to the cent so that the
//! rounded amounts sum to the rounded total exactly (largest remainder).

use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, AsArray, Float64Array, RecordBatch};
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

/// Splits each row's `cost_cents` into (busy, idle) cents: each part within
/// a cent of its exact amount (`busy`, `idle`, in currency), the parts
/// summing to the row's cents, and the idle parts of all rows summing to
/// the rounded total of `idle` where the rows' cents allow it (the cents
/// left over go to the largest remainders, as in [`cents_keeping_total`]).
pub fn split_cents(cost_cents: &[i64], busy: &[f64], idle: &[f64]) -> Vec<(i64, i64)> {
    let n = cost_cents.len().min(busy.len()).min(idle.len());
    let exact_idle: Vec<f64> = idle[..n].iter().map(|i| i * 100.0).collect();
    let target = exact_idle.iter().sum::<f64>().round() as i64;
    // The idle cents of a row lie between its floor and ceiling, and leave
    // the busy part between its own floor and ceiling and never below 0.
    let bounds: Vec<(i64, i64)> = (0..n)
        .map(|r| {
            let (b, i, c) = (busy[r] * 100.0, exact_idle[r], cost_cents[r]);
            let lo = (i.floor() as i64).max(c - b.ceil() as i64).clamp(0, c);
            let hi = (i.ceil() as i64).min(c - b.floor() as i64).clamp(lo, c);
            (lo, hi)
        })
        .collect();
    let mut idle_cents: Vec<i64> = bounds.iter().map(|(lo, _)| *lo).collect();
    let mut need = target - idle_cents.iter().sum::<i64>();
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&a, &b| {
        (exact_idle[b] - idle_cents[b] as f64).total_cmp(&(exact_idle[a] - idle_cents[a] as f64))
    });
    for &r in &order {
        if need <= 0 {
            break;
        }
        if idle_cents[r] < bounds[r].1 {
            idle_cents[r] += 1;
            need -= 1;
        }
    }
    (0..n).map(|r| (cost_cents[r] - idle_cents[r], idle_cents[r])).collect()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounded_cents_add_up_to_the_rounded_total() {
        // Three thirds of a dollar: 33 + 33 + 34 cents, not 33 × 3.
        assert_eq!(cents_keeping_total(&[1.0 / 3.0; 3]), vec![34, 33, 33]);
        let amounts = [10.004, 20.003, 30.006, 0.0];
        let cents = cents_keeping_total(&amounts);
        assert_eq!(cents.iter().sum::<i64>(), 6001);
        assert_eq!(cents, vec![1000, 2000, 3001, 0]);
        assert_eq!(cents_keeping_total(&[]), Vec::<i64>::new());
    }

    #[test]
    fn busy_and_idle_split_each_row_and_keep_the_idle_total() {
        // A row never idle keeps its idle at 0 even when its cost was rounded up.
        let split = split_cents(&[46, 76], &[0.454875, 0.0], &[0.0, 0.7625]);
        assert_eq!(split, vec![(46, 0), (0, 76)]);
        // Two rows of 0.5 busy + 0.5 idle cents each: the idle total of one
        // cent goes to one row only.
        let split = split_cents(&[1, 1], &[0.005, 0.005], &[0.005, 0.005]);
        assert_eq!(split.iter().map(|s| s.1).sum::<i64>(), 1);
        assert!(split.iter().all(|(b, i)| b + i == 1));
    }

    #[test]
    fn many_small_amounts_still_sum() {
        let amounts: Vec<f64> = (0..1000).map(|i| f64::from(i) * 0.001_7 + 0.003).collect();
        let total = (amounts.iter().sum::<f64>() * 100.0).round() as i64;
        assert_eq!(cents_keeping_total(&amounts).iter().sum::<i64>(), total);
    }
}
