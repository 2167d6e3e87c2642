//! How numbers read to a person: thousands separators and money.
//!
//! The charts and the report bundle both format through here, so "$12,400"
//! on a bar and in a table are the same string. Locale is fixed: `,` groups
//! thousands and `.` marks decimals.

/// `value` rounded to `decimals` places with `,` between thousands:
/// `grouped(1234567.891, 2)` is `"1,234,567.89"`. Not-a-number and
/// infinities read `"n/a"`. A value that rounds to zero has no minus sign.
pub fn grouped(value: f64, decimals: usize) -> String {
    if !value.is_finite() {
        return "n/a".to_owned();
    }
    let digits = format!("{:.*}", decimals, value.abs());
    let (int_part, frac_part) = match digits.split_once('.') {
        Some((int_part, frac_part)) => (int_part, Some(frac_part)),
        None => (digits.as_str(), None),
    };
    let mut out = String::with_capacity(digits.len() + digits.len() / 3 + 1);
    let is_zero = digits.bytes().all(|b| b == b'0' || b == b'.');
    if value < 0.0 && !is_zero {
        out.push('-');
    }
    let len = int_part.len();
    for (i, c) in int_part.chars().enumerate() {
        if i > 0 && (len - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    if let Some(frac_part) = frac_part {
        out.push('.');
        out.push_str(frac_part);
    }
    out
}

/// `amount` of `currency` (an ISO 4217 code such as `"USD"`) with cents:
/// `"$1,240.50"`, `"€1,240.50"`, `"£1,240.50"`, and for other codes the
/// code after the number, `"1,240.50 CHF"`. Negative amounts read
/// `"-$1,240.50"`.
pub fn money(amount: f64, currency: &str) -> String {
    with_currency(grouped(amount, 2), currency)
}

/// Like [`money`] but rounded to whole units, for chart labels and axes:
/// `"$1,240"`, `"1,240 CHF"`.
pub fn money_whole(amount: f64, currency: &str) -> String {
    with_currency(grouped(amount, 0), currency)
}

/// How a money amount's currency reads in a title or after a number: the
/// symbol for `$`, `€` and `£` (`"USD"` → `"$"`), else the code as given,
/// trimmed (`"CHF"`); `None` for an empty code.
pub fn currency_unit(currency: &str) -> Option<String> {
    let code = currency.trim();
    match symbol(code) {
        Some(symbol) => Some(symbol.to_string()),
        None if code.is_empty() => None,
        None => Some(code.to_owned()),
    }
}

/// The symbol written before an amount of `code`, for the codes that have
/// one everybody reads.
fn symbol(code: &str) -> Option<char> {
    match code.to_ascii_uppercase().as_str() {
        "USD" => Some('$'),
        "EUR" => Some('€'),
        "GBP" => Some('£'),
        _ => None,
    }
}

fn with_currency(number: String, currency: &str) -> String {
    let code = currency.trim();
    if number == "n/a" {
        return number;
    }
    match (symbol(code), number.strip_prefix('-')) {
        (Some(symbol), Some(positive)) => format!("-{symbol}{positive}"),
        (Some(symbol), None) => format!("{symbol}{number}"),
        (None, _) if code.is_empty() => number,
        (None, _) => format!("{number} {code}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grouped_inserts_separators_and_rounds() {
        assert_eq!(grouped(0.0, 2), "0.00");
        assert_eq!(grouped(999.0, 0), "999");
        assert_eq!(grouped(1000.0, 0), "1,000");
        assert_eq!(grouped(1_234_567.891, 2), "1,234,567.89");
        assert_eq!(grouped(999_999.996, 2), "1,000,000.00");
        assert_eq!(grouped(-12_345.0, 1), "-12,345.0");
        assert_eq!(grouped(-0.001, 2), "0.00");
        assert_eq!(grouped(f64::NAN, 2), "n/a");
        assert_eq!(grouped(f64::INFINITY, 0), "n/a");
    }

    #[test]
    fn money_puts_known_symbols_first_and_other_codes_last() {
        assert_eq!(money(1240.5, "USD"), "$1,240.50");
        assert_eq!(money(1240.5, "usd"), "$1,240.50");
        assert_eq!(money(1240.5, "EUR"), "€1,240.50");
        assert_eq!(money(1240.5, "GBP"), "£1,240.50");
        assert_eq!(money(1240.5, "CHF"), "1,240.50 CHF");
        assert_eq!(money(-1240.5, "USD"), "-$1,240.50");
        assert_eq!(money(-1240.5, "CHF"), "-1,240.50 CHF");
        assert_eq!(money(f64::NAN, "USD"), "n/a");
        assert_eq!(money(5.0, ""), "5.00");
    }

    #[test]
    fn currency_units_are_symbols_or_codes() {
        assert_eq!(currency_unit("USD").as_deref(), Some("$"));
        assert_eq!(currency_unit("eur").as_deref(), Some("€"));
        assert_eq!(currency_unit("GBP").as_deref(), Some("£"));
        assert_eq!(currency_unit(" CHF ").as_deref(), Some("CHF"));
        assert_eq!(currency_unit(""), None);
    }

    #[test]
    fn money_whole_rounds_to_units() {
        assert_eq!(money_whole(1240.5, "USD"), "$1,240");
        assert_eq!(money_whole(1240.51, "USD"), "$1,241");
        assert_eq!(money_whole(48_000.0, "CHF"), "48,000 CHF");
    }

    #[test]
    fn figures_as_the_reports_print_them() {
        assert_eq!(grouped(46080.0, 1), "46,080.0");
        assert_eq!(grouped(999.949, 1), "999.9");
        assert_eq!(grouped(1_234_567.891, 2), "1,234,567.89");
        assert_eq!(grouped(-1234.0, 0), "-1,234");
        assert_eq!(money(1240.5, "USD"), "$1,240.50");
        assert_eq!(money(0.004, "EUR"), "€0.00");
        assert_eq!(money(-3.0, "CHF"), "-3.00 CHF");
    }
}
