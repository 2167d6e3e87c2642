//! Rounding for print: money to the cent in a way that keeps sums, other
//! figures to a fixed number of decimals.
//!
//! A report whose rows add up to a total must still add up once printed:
//! [`cents_keeping_total`] rounds each amount to the cent so that the
//! rounded amounts sum to the rounded total exactly (largest remainder).
//!
//! Cents are whole numbers (`i64`) only while an `f64` holds every whole
//! number of cents exactly: up to [`MAX_CENTS`], about 90 trillion in the
//! config's currency. An amount beyond that, or not a number, is
//! [`MoneyOverflow`], never a saturated or wrapped figure of the wrong sign.

/// The most cents (either sign) rounded and added up: 2^53, the last whole
/// number an `f64` holds with every whole number below it.
pub const MAX_CENTS: f64 = 9_007_199_254_740_992.0;

/// An amount of money too large to count in cents exactly, or not a number.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error(
    "cannot round the amount {amount:e} to the cent: amounts and their sums must stay within \
     ±90,071,992,547,409.92; check the prices in the config"
)]
pub struct MoneyOverflow {
    /// The amount (or sum of amounts), in currency.
    pub amount: f64,
}

/// `amount × 100`, when it is finite and within [`MAX_CENTS`].
fn exact_cents(amount: f64) -> Result<f64, MoneyOverflow> {
    let cents = amount * 100.0;
    if cents.is_finite() && cents.abs() <= MAX_CENTS { Ok(cents) } else { Err(MoneyOverflow { amount }) }
}

/// The sum of `cents`, when it is within [`MAX_CENTS`].
fn checked_sum(cents: &[i64]) -> Result<i64, MoneyOverflow> {
    let limit = MAX_CENTS as i64;
    cents
        .iter()
        .try_fold(0i64, |sum, c| sum.checked_add(*c).filter(|s| s.abs() <= limit))
        .ok_or(MoneyOverflow { amount: cents.iter().map(|c| *c as f64).sum::<f64>() / 100.0 })
}

/// Each of `amounts` in whole cents, rounded so that they sum to the sum of
/// `amounts` rounded to the cent: every amount is rounded down, and the
/// cents left over go one each to the amounts with the largest remainders
/// (ties to the earlier one). [`MoneyOverflow`] when an amount or the sum
/// is beyond [`MAX_CENTS`] cents or not a number.
pub fn cents_keeping_total(amounts: &[f64]) -> Result<Vec<i64>, MoneyOverflow> {
    let exact: Vec<f64> = amounts.iter().map(|a| exact_cents(*a)).collect::<Result<_, _>>()?;
    // Each term is within 2^53; the sum is checked before it is converted.
    let total = exact_cents(exact.iter().sum::<f64>() / 100.0)?.round() as i64;
    let mut cents: Vec<i64> = exact.iter().map(|c| c.floor() as i64).collect();
    let left = total - checked_sum(&cents)?;
    let mut by_remainder: Vec<usize> = (0..exact.len()).collect();
    by_remainder.sort_by(|&a, &b| (exact[b] - exact[b].floor()).total_cmp(&(exact[a] - exact[a].floor())));
    for &i in by_remainder.iter().cycle().take(usize::try_from(left.max(0)).unwrap_or(0)) {
        cents[i] += 1;
    }
    Ok(cents)
}

/// Splits each row's `cost_cents` into parts, one per column of `parts`
/// (the exact amounts, in currency, of each part of each row: `parts[k][r]`
/// is part `k` of row `r`): each part within a cent of its exact amount,
/// the parts of a row summing to the row's cents, and the parts after the
/// first summing over the rows to the rounded total of their column where
/// the rows' cents allow it (the cents left over go to the largest
/// remainders, as in [`cents_keeping_total`]). The first part takes what the
/// others leave. Returns, per row, its parts in the order of `parts`.
/// [`MoneyOverflow`] as there.
pub fn split_cents(cost_cents: &[i64], parts: &[&[f64]]) -> Result<Vec<Vec<i64>>, MoneyOverflow> {
    let n = parts.iter().map(|p| p.len()).fold(cost_cents.len(), usize::min);
    checked_sum(&cost_cents[..n])?;
    let exact: Vec<Vec<f64>> = parts
        .iter()
        .map(|p| p[..n].iter().map(|a| exact_cents(*a)).collect::<Result<Vec<_>, _>>())
        .collect::<Result<_, _>>()?;
    let mut out: Vec<Vec<i64>> = vec![vec![0; parts.len()]; n];
    // The cents of each row not yet given to a part.
    let mut left: Vec<i64> = cost_cents[..n].to_vec();
    for k in (1..parts.len()).rev() {
        let column = &exact[k];
        let target = exact_cents(column.iter().sum::<f64>() / 100.0)?.round() as i64;
        // A row's part lies between its floor and ceiling, and leaves the
        // parts still to come (those before it; the first takes the rest)
        // between the floor and ceiling of their sum and never below 0.
        let bounds: Vec<(i64, i64)> = (0..n)
            .map(|r| {
                let rest: f64 = exact[..k].iter().map(|e| e[r]).sum();
                let (p, c) = (column[r], left[r]);
                let lo = (p.floor() as i64).max(c - rest.ceil() as i64).clamp(0, c.max(0));
                let hi = (p.ceil() as i64).min(c - rest.floor() as i64).clamp(lo, c.max(lo));
                (lo, hi)
            })
            .collect();
        let mut cents: Vec<i64> = bounds.iter().map(|(lo, _)| *lo).collect();
        let mut need = target - cents.iter().sum::<i64>();
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by(|&a, &b| (column[b] - cents[b] as f64).total_cmp(&(column[a] - cents[a] as f64)));
        for &r in &order {
            if need <= 0 {
                break;
            }
            if cents[r] < bounds[r].1 {
                cents[r] += 1;
                need -= 1;
            }
        }
        for r in 0..n {
            out[r][k] = cents[r];
            left[r] -= cents[r];
        }
    }
    if !parts.is_empty() {
        for r in 0..n {
            out[r][0] = left[r];
        }
    }
    Ok(out)
}

/// `x` rounded to `decimals` decimals.
pub fn round_to(x: f64, decimals: i32) -> f64 {
    let scale = 10f64.powi(decimals);
    (x * scale).round() / scale
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounded_cents_add_up_to_the_rounded_total() {
        // Three thirds of a dollar: 33 + 33 + 34 cents, not 33 × 3.
        assert_eq!(cents_keeping_total(&[1.0 / 3.0; 3]), Ok(vec![34, 33, 33]));
        let amounts = [10.004, 20.003, 30.006, 0.0];
        let cents = cents_keeping_total(&amounts).expect("small amounts");
        assert_eq!(cents.iter().sum::<i64>(), 6001);
        assert_eq!(cents, vec![1000, 2000, 3001, 0]);
        assert_eq!(cents_keeping_total(&[]), Ok(Vec::<i64>::new()));
    }

    #[test]
    fn busy_and_idle_split_each_row_and_keep_the_idle_total() {
        // A row never idle keeps its idle at 0 even when its cost was rounded up.
        let split = split_cents(&[46, 76], &[&[0.454875, 0.0], &[0.0, 0.7625]]);
        assert_eq!(split, Ok(vec![vec![46, 0], vec![0, 76]]));
        // Two rows of 0.5 busy + 0.5 idle cents each: the idle total of one
        // cent goes to one row only.
        let split = split_cents(&[1, 1], &[&[0.005, 0.005], &[0.005, 0.005]]).expect("small amounts");
        assert_eq!(split.iter().map(|s| s[1]).sum::<i64>(), 1);
        assert!(split.iter().all(|s| s[0] + s[1] == 1));
    }

    #[test]
    fn three_parts_keep_each_row_and_each_later_column() {
        // Busy, idle and unknown thirds of 1.00, 2.00 and 0.01: every row
        // keeps its cents, idle and unknown keep their rounded totals.
        let third = |c: f64| c / 3.0;
        let busy = [third(1.0), third(2.0), third(0.01)];
        let (idle, unknown) = (busy, busy);
        let split = split_cents(&[100, 200, 1], &[&busy, &idle, &unknown]).expect("small amounts");
        for (row, cents) in split.iter().zip([100, 200, 1]) {
            assert_eq!(row.iter().sum::<i64>(), cents, "{row:?}");
        }
        let column = |k: usize| split.iter().map(|r| r[k]).sum::<i64>();
        // 33.33 + 66.67 + 0.33 = 100.33 cents: 100 each for idle and unknown.
        assert_eq!((column(1), column(2)), (100, 100));
        assert_eq!(column(0), 301 - 200);
        // Each part within a cent of its exact amount.
        for (r, row) in split.iter().enumerate() {
            for (k, exact) in [busy[r], idle[r], unknown[r]].iter().enumerate() {
                assert!((row[k] as f64 - exact * 100.0).abs() < 1.0, "row {r} part {k}: {row:?}");
            }
        }
        // One part: the row itself.
        assert_eq!(split_cents(&[7], &[&[0.07]]), Ok(vec![vec![7]]));
    }

    #[test]
    fn many_small_amounts_still_sum() {
        let amounts: Vec<f64> = (0..1000).map(|i| f64::from(i) * 0.001_7 + 0.003).collect();
        let total = (amounts.iter().sum::<f64>() * 100.0).round() as i64;
        assert_eq!(cents_keeping_total(&amounts).expect("small amounts").iter().sum::<i64>(), total);
    }

    #[test]
    fn amounts_beyond_exact_cents_are_an_error_never_a_wrong_sign() {
        // The largest amount counted exactly, and a sum of two that is too much.
        let max = MAX_CENTS / 100.0;
        assert_eq!(cents_keeping_total(&[max]), Ok(vec![MAX_CENTS as i64]));
        assert!(cents_keeping_total(&[max, max]).is_err());
        // What a purchase price of 1e308 gives: no saturated or wrapped cents.
        for bad in [1e17, -1e17, 1e300, f64::INFINITY, f64::NAN] {
            let err = cents_keeping_total(&[1.0, bad]).expect_err("out of range");
            assert!(err.to_string().contains("check the prices in the config"), "{err}");
            assert!(split_cents(&[100], &[&[bad], &[0.0]]).is_err());
            assert!(split_cents(&[100], &[&[0.0], &[bad]]).is_err());
        }
        // Many rows each within the limit whose sum is not.
        assert!(cents_keeping_total(&[max / 2.0; 3]).is_err());
        assert!(split_cents(&[i64::MAX, 1], &[&[0.0, 0.0], &[0.0, 0.0]]).is_err());
    }
}
