//! Values as nvidia-smi and pynvml loggers write them (`45 %`, `1234 MiB`,
//! `250.12 W`, `[N/A]`), turned into the schema's units (percent, bytes,
//! milliwatts, MHz, °C). A value without a unit takes its column's
//! (`utilization.gpu [%]`), else the quantity's usual one; a unit the
//! quantity does not know is an error, never a guess. Whether the value is
//! one a GPU can have is [`super::ranges`]' business.

/// What a column measures, and so which units it takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quantity {
    /// Percent, 0–100 (`%`).
    Percent,
    /// Memory (`B`, `KiB`, `MiB`, `GiB`; default MiB), to bytes.
    Memory,
    /// Power (`W`, `mW`; default W), to milliwatts.
    Power,
    /// Clock (`MHz`, `GHz`; default MHz), to MHz.
    Clock,
    /// Temperature (`C`, or none), to °C.
    Temperature,
    /// A plain integer (index, pid).
    Integer,
}

impl Quantity {
    /// The unit a value of this quantity has when neither it nor its
    /// column names one.
    pub fn default_unit(self) -> &'static str {
        match self {
            Quantity::Percent => "%",
            Quantity::Memory => "MiB",
            Quantity::Power => "W",
            Quantity::Clock => "MHz",
            Quantity::Temperature => "C",
            Quantity::Integer => "",
        }
    }

    /// How many schema units one `unit` is; `None` for a unit this
    /// quantity does not take.
    fn factor(self, unit: &str) -> Option<f64> {
        match (self, unit) {
            (Quantity::Percent, "%") => Some(1.0),
            (Quantity::Memory, "B") => Some(1.0),
            (Quantity::Memory, "KiB") => Some(1024.0),
            (Quantity::Memory, "MiB") => Some(1_048_576.0),
            (Quantity::Memory, "GiB") => Some(1_073_741_824.0),
            (Quantity::Power, "W") => Some(1_000.0),
            (Quantity::Power, "mW") => Some(1.0),
            (Quantity::Clock, "MHz") => Some(1.0),
            (Quantity::Clock, "GHz") => Some(1_000.0),
            (Quantity::Temperature, "C" | "°C") => Some(1.0),
            (Quantity::Integer, "") => Some(1.0),
            _ => None,
        }
    }
}

/// Whether `raw` is one of nvidia-smi's "no value" markers: `[N/A]`,
/// `[Not Supported]`, `[Unknown Error]`, `[Insufficient Permissions]`
/// (any bracketed word), `N/A`, or nothing at all.
pub fn is_null(raw: &str) -> bool {
    let v = raw.trim();
    v.is_empty() || v == "N/A" || (v.starts_with('[') && v.ends_with(']'))
}

/// `raw` in the schema's unit of `quantity`: `Ok(None)` for a "no value"
/// marker, an error message for a value that is no number (or not a finite
/// one) or a unit the quantity does not take. `column_unit` is the unit of
/// the column's header (`[MiB]`), used when the value has none. The range
/// is not checked here ([`super::ranges`]).
pub fn parse(raw: &str, quantity: Quantity, column_unit: Option<&str>) -> Result<Option<f64>, String> {
    if is_null(raw) {
        return Ok(None);
    }
    let v = raw.trim();
    let split = v
        .find(|c: char| !(c.is_ascii_digit() || matches!(c, '.' | '-' | '+' | 'e' | 'E')))
        .unwrap_or(v.len());
    // `1e3` is a number, `12 MiB`'s `e` is not there: the unit starts at
    // the first character no number has.
    let (number, unit) = v.split_at(split);
    let unit = unit.trim();
    let number: f64 = number
        .trim()
        .parse()
        .ok()
        .filter(|n: &f64| n.is_finite())
        .ok_or_else(|| format!("{v:?} is not a number"))?;
    let unit = if unit.is_empty() { column_unit.unwrap_or(quantity.default_unit()) } else { unit };
    let factor = quantity
        .factor(unit)
        .ok_or_else(|| format!("unknown unit {unit:?} in {v:?} (expected {})", quantity.default_unit()))?;
    Ok(Some(number * factor))
}

/// Dates for a log of times of day (`17:26:50`): the first on the day
/// given (`--date`), each one earlier than the one before it by more than
/// 12 hours on the next day (a log that ran past midnight).
#[derive(Debug, Default, Clone)]
pub struct Days {
    /// The last time (ms into its day) and the days since the first.
    last: Option<(i64, u64)>,
}

impl Days {
    /// The date of `time`, the next line of the log, which started on
    /// `start`.
    pub fn date_of(&mut self, start: chrono::NaiveDate, time: chrono::NaiveTime) -> chrono::NaiveDate {
        use chrono::Timelike;
        let ms =
            i64::from(time.num_seconds_from_midnight()) * 1_000 + i64::from(time.nanosecond() / 1_000_000);
        let days = match self.last {
            Some((last, days)) if ms + 12 * 3_600_000 < last => days + 1,
            Some((_, days)) => days,
            None => 0,
        };
        self.last = Some((ms, days));
        start + chrono::Days::new(days)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn times_of_day_roll_over_midnight() {
        let start = chrono::NaiveDate::from_ymd_opt(2026, 1, 31).expect("a date");
        let t = |h, m| chrono::NaiveTime::from_hms_opt(h, m, 0).expect("a time");
        let mut days = Days::default();
        let dates: Vec<u32> = [t(23, 0), t(23, 59), t(0, 1), t(5, 0), t(1, 0), t(23, 0), t(0, 0)]
            .iter()
            .map(|&x| {
                use chrono::Datelike;
                days.date_of(start, x).day()
            })
            .collect();
        // A step back of under 12 hours (05:00 to 01:00) is no new day.
        assert_eq!(dates, [31, 31, 1, 1, 1, 1, 2]);
    }

    use super::*;

    #[test]
    fn values_with_and_without_units() {
        assert_eq!(parse("45 %", Quantity::Percent, None), Ok(Some(45.0)));
        assert_eq!(parse("45", Quantity::Percent, Some("%")), Ok(Some(45.0)));
        assert_eq!(parse("1234 MiB", Quantity::Memory, None), Ok(Some(1234.0 * 1_048_576.0)));
        assert_eq!(parse("512MiB", Quantity::Memory, None), Ok(Some(512.0 * 1_048_576.0)));
        assert_eq!(parse("250.12 W", Quantity::Power, None), Ok(Some(250_120.0)));
        assert_eq!(parse("38.2W", Quantity::Power, None), Ok(Some(38_200.0)));
        assert_eq!(parse("1410 MHz", Quantity::Clock, None), Ok(Some(1410.0)));
        assert_eq!(parse("65", Quantity::Temperature, None), Ok(Some(65.0)));
        assert_eq!(parse("7", Quantity::Memory, Some("GiB")), Ok(Some(7.0 * 1_073_741_824.0)));
    }

    #[test]
    fn markers_are_null_and_bad_values_say_why() {
        for marker in ["[N/A]", "[Not Supported]", " [Unknown Error] ", "N/A", ""] {
            assert_eq!(parse(marker, Quantity::Power, None), Ok(None), "{marker}");
        }
        assert_eq!(
            parse("45 kg", Quantity::Percent, None),
            Err("unknown unit \"kg\" in \"45 kg\" (expected %)".into())
        );
        assert_eq!(parse("abc", Quantity::Percent, None), Err("\"abc\" is not a number".into()));
        assert_eq!(parse("4.5.1 %", Quantity::Percent, None), Err("\"4.5.1 %\" is not a number".into()));
        assert_eq!(parse("1e400 W", Quantity::Power, None), Err("\"1e400 W\" is not a number".into()));
        assert_eq!(
            parse("12 W", Quantity::Memory, None),
            Err("unknown unit \"W\" in \"12 W\" (expected MiB)".into())
        );
    }
}
