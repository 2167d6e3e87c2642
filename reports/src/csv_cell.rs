//! The one rule for a cell of every CSV file apron writes (a report's
//! tables, `--format csv`, `apron sql --out FILE.csv`): a spreadsheet takes
//! a cell that starts with `=`, `+`, `-` or `@` (or a tab or carriage
//! return) for a formula, and the cells carry text apron does not choose
//! (process, user, team and host names; whatever a query returns). Such a
//! cell is written with a leading `'`, which spreadsheets read as "this is
//! text" (OWASP's advice against CSV injection); a number, `-3.5`
//! included, is written as it is. Quoting is the CSV writer's business.

use std::borrow::Cow;

/// `cell` as a spreadsheet must show it: text a spreadsheet would run as a
/// formula gets a leading `'`; anything else, numbers included, is kept.
pub fn defused(cell: &str) -> Cow<'_, str> {
    let formula = cell.starts_with(['=', '+', '-', '@', '\t', '\r']);
    if formula && !is_number(cell) { Cow::Owned(format!("'{cell}")) } else { Cow::Borrowed(cell) }
}

/// True for a plain decimal number: an optional sign, digits with at most
/// one decimal point, an optional exponent (`-12`, `+0.5`, `-1.5e-3`).
/// Not `inf` or `NaN`, which a spreadsheet reads as names.
fn is_number(text: &str) -> bool {
    let unsigned = text.strip_prefix(['+', '-']).unwrap_or(text);
    let (mantissa, exponent) = match unsigned.split_once(['e', 'E']) {
        Some((m, e)) => (m, Some(e)),
        None => (unsigned, None),
    };
    let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    let mantissa_ok = !(whole.is_empty() && fraction.is_empty()) && digits(whole) && digits(fraction);
    let exponent_ok = exponent.is_none_or(|e| {
        let e = e.strip_prefix(['+', '-']).unwrap_or(e);
        !e.is_empty() && digits(e)
    });
    mantissa_ok && exponent_ok
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formulas_become_text_and_numbers_stay_numbers() {
        for (cell, want) in [
            ("=HYPERLINK(\"http://x\",\"y\")", "'=HYPERLINK(\"http://x\",\"y\")"),
            ("+1+2", "'+1+2"),
            ("-2+3+cmd|' /C calc'!A0", "'-2+3+cmd|' /C calc'!A0"),
            ("@SUM(A1:A2)", "'@SUM(A1:A2)"),
            ("\tx", "'\tx"),
            ("\rx", "'\rx"),
            ("-", "'-"),
            ("-inf", "'-inf"),
            ("-NaN", "'-NaN"),
            ("-1e", "'-1e"),
            ("-12.50", "-12.50"),
            ("+0.5", "+0.5"),
            ("-1.5e-3", "-1.5e-3"),
            ("-.5", "-.5"),
            ("12", "12"),
            ("python", "python"),
            ("a=b", "a=b"),
            ("", ""),
        ] {
            assert_eq!(defused(cell), want, "{cell:?}");
        }
    }
}
