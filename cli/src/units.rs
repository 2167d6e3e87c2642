//! Durations and sizes as people type them on a command line.
//!
//! A duration is humantime's (`30s`, `5m`, `2h`, `7d`, `1h30m`); a bare
//! number is refused with the unit the flag most likely meant
//! (`--last 30`: "did you mean 30d?"), since `30` alone could be seconds or
//! days. A size is a number with an optional unit, `K`, `M`, `G`, `T` with or
//! without `iB`/`B`, all powers of 1024 (`1GiB`, `512M`, `1.5G`); a bare
//! number is in the flag's own unit (bytes for `--memory-limit`, MiB for
//! `--min-mem`).

use std::time::Duration;

/// The unit a bare number given to a duration flag most likely meant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Likely {
    /// `--wait 30`: 30s.
    Seconds,
    /// `--min-idle 10`: 10m.
    Minutes,
    /// `--for 2`: 2h.
    Hours,
    /// `--last 30`: 30d.
    Days,
}

impl Likely {
    /// humantime's suffix for the unit.
    fn suffix(self) -> &'static str {
        match self {
            Likely::Seconds => "s",
            Likely::Minutes => "m",
            Likely::Hours => "h",
            Likely::Days => "d",
        }
    }

    /// The unit in words, plural.
    fn words(self) -> &'static str {
        match self {
            Likely::Seconds => "seconds",
            Likely::Minutes => "minutes",
            Likely::Hours => "hours",
            Likely::Days => "days",
        }
    }
}

/// What the duration flags' errors give as examples.
pub const DURATION_EXAMPLES: &str = "30s, 5m, 2h, 7d, 1h30m";

/// Parses a duration (`30s`, `5m`, `2h`, `7d`, `1h30m`). A bare number is
/// refused with a suggestion in the `likely` unit; any other mistake gets
/// humantime's reason and examples. clap puts the flag and the value in
/// front of the message.
pub fn duration(text: &str, likely: Likely) -> Result<Duration, String> {
    let trimmed = text.trim();
    if !trimmed.is_empty() && trimmed.chars().all(|c| c.is_ascii_digit() || c == '.') {
        return Err(format!(
            "a duration needs a unit: did you mean {trimmed}{} ({trimmed} {})? (examples: {DURATION_EXAMPLES})",
            likely.suffix(),
            if trimmed == "1" { likely.words().trim_end_matches('s') } else { likely.words() }
        ));
    }
    humantime::parse_duration(trimmed).map_err(|e| format!("{e} (examples: {DURATION_EXAMPLES})"))
}

/// [`duration`], refused unless at least `min`, with "must be at least
/// `min_text`" (`min` as the flag's help writes it: `1ms`, `1d`).
pub fn duration_at_least(
    text: &str,
    likely: Likely,
    min: Duration,
    min_text: &str,
) -> Result<Duration, String> {
    let d = duration(text, likely)?;
    if d < min {
        return Err(format!("must be at least {min_text}"));
    }
    Ok(d)
}

/// [`duration`], refused when zero ("must be longer than zero").
pub fn positive_duration(text: &str, likely: Likely) -> Result<Duration, String> {
    let d = duration(text, likely)?;
    if d.is_zero() {
        return Err("must be longer than zero".into());
    }
    Ok(d)
}

/// A duration longer than zero whose bare number means seconds (`--wait
/// 30`: 30s), as a clap `value_parser`.
pub fn positive_seconds(text: &str) -> Result<Duration, String> {
    positive_duration(text, Likely::Seconds)
}

/// A duration longer than zero whose bare number means minutes
/// (`--min-idle 10`: 10m), as a clap `value_parser`.
pub fn positive_minutes(text: &str) -> Result<Duration, String> {
    positive_duration(text, Likely::Minutes)
}

/// A duration longer than zero whose bare number means hours (`--for 2`:
/// 2h), as a clap `value_parser`.
pub fn positive_hours(text: &str) -> Result<Duration, String> {
    positive_duration(text, Likely::Hours)
}

/// A duration longer than zero whose bare number means days (`--last 30`:
/// 30d), as a clap `value_parser`.
pub fn positive_days(text: &str) -> Result<Duration, String> {
    positive_duration(text, Likely::Days)
}

/// Why a size was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SizeError {
    /// Not a number with one of the units.
    NotASize,
    /// Past 2^63 bytes: a typo, not a machine.
    TooLarge,
}

/// Bytes in `text`: `512M`, `2G`, `1.5GiB`, `64 MiB`, `1kb`; `K`, `M`, `G`,
/// `T` are powers of 1024 with or without `B`/`iB`, in any case. A bare
/// number counts `bare_unit` bytes each (1 for bytes, 1 << 20 for MiB).
/// Fractions of a byte are dropped.
pub fn bytes(text: &str, bare_unit: u64) -> Result<u64, SizeError> {
    let text = text.trim();
    let split = text.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    // Digits, with at most one point that has a digit on some side:
    // `1.5`, `2.`, `.5`; not `.`, `1.2.3`, `-1`, `1e9`, `inf`.
    if number.is_empty() || number == "." || number.matches('.').count() > 1 {
        return Err(SizeError::NotASize);
    }
    let factor: u64 = match unit.trim_start().to_ascii_lowercase().as_str() {
        "" => bare_unit,
        "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        "t" | "tb" | "tib" => 1 << 40,
        _ => return Err(SizeError::NotASize),
    };
    let value: f64 = number.parse().map_err(|_| SizeError::NotASize)?;
    // Exact enough for any size a machine has.
    #[allow(clippy::cast_precision_loss)]
    let bytes = value * factor as f64;
    if !bytes.is_finite() || bytes >= 2f64.powi(63) {
        return Err(SizeError::TooLarge);
    }
    // Truncation to whole bytes is the intent.
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    Ok(bytes as u64)
}

/// Whole MiB in `text` (`256`, `1GiB`, `512M`), for flags whose unit is MiB:
/// a bare number is MiB; a size that is not a whole number of MiB is rounded
/// down.
pub fn mib(text: &str) -> Result<u64, String> {
    match bytes(text, 1 << 20) {
        Ok(b) => Ok(b >> 20),
        Err(SizeError::NotASize) => {
            Err("not a size: give MiB (256) or a size with its unit (1GiB, 512M)".into())
        }
        Err(SizeError::TooLarge) => Err(format!("{} is larger than any GPU's memory", text.trim())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_as_typed() {
        assert_eq!(duration("30d", Likely::Days), Ok(Duration::from_secs(30 * 86_400)));
        assert_eq!(duration("1h30m", Likely::Hours), Ok(Duration::from_secs(5_400)));
        assert_eq!(duration(" 10m ", Likely::Minutes), Ok(Duration::from_secs(600)));
    }

    #[test]
    fn a_bare_number_gets_its_likely_unit() {
        assert_eq!(
            duration("30", Likely::Days),
            Err("a duration needs a unit: did you mean 30d (30 days)? (examples: 30s, 5m, 2h, 7d, 1h30m)"
                .into())
        );
        let minutes = duration("10", Likely::Minutes).expect_err("bare");
        assert!(minutes.contains("did you mean 10m (10 minutes)?"), "{minutes}");
        let other = duration("soon", Likely::Seconds).expect_err("not a duration");
        assert!(other.ends_with("(examples: 30s, 5m, 2h, 7d, 1h30m)"), "{other}");
    }

    #[test]
    fn a_duration_below_its_floor_is_refused() {
        assert_eq!(positive_seconds("0s"), Err("must be longer than zero".into()));
        assert_eq!(positive_days("7d"), Ok(Duration::from_secs(7 * 86_400)));
        assert_eq!(
            duration_at_least("500us", Likely::Seconds, Duration::from_millis(1), "1ms"),
            Err("must be at least 1ms".into())
        );
        assert_eq!(
            duration_at_least("1ms", Likely::Seconds, Duration::from_millis(1), "1ms"),
            Ok(Duration::from_millis(1))
        );
    }

    #[test]
    fn sizes_as_typed() {
        assert_eq!(bytes("512M", 1), Ok(512 << 20));
        assert_eq!(bytes("1.5GiB", 1), Ok(3 << 29));
        assert_eq!(bytes("64 MiB", 1), Ok(64 << 20));
        assert_eq!(bytes("2kb", 1), Ok(2048));
        assert_eq!(bytes("1073741824", 1), Ok(1 << 30));
        assert_eq!(bytes("7", 1 << 20), Ok(7 << 20));
        for bad in ["", ".", "1.2.3", "-1", "1e9", "inf", "12 parsecs", "G"] {
            assert_eq!(bytes(bad, 1), Err(SizeError::NotASize), "{bad:?}");
        }
        assert_eq!(bytes("9000000T", 1), Err(SizeError::TooLarge));
    }

    #[test]
    fn mib_flags_take_mib_or_a_size() {
        assert_eq!(mib("256"), Ok(256));
        assert_eq!(mib("1GiB"), Ok(1024));
        assert_eq!(mib("1.5G"), Ok(1536));
        assert_eq!(mib("1536K"), Ok(1));
        assert!(mib("lots").expect_err("bad").starts_with("not a size"));
    }
}
