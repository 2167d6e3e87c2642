//! Every column a report table may have: its title on the page and in the
//! summary (with its unit), and how its cells read there ([`ColumnKind`]).
//!
//! A table names its columns as its CSV header does (`idle_cost`,
//! `share_pct`: data names, snake_case with the unit in them); the page and
//! the summary show [`Column::title`] (`Idle cost ($)`, `Share (%)`) and
//! each cell through [`ColumnKind::display`] (`$1,234.56`, `12.5`). This table is
//! the one place a title is said: [`write_bundle`](super::write_bundle)
//! refuses a table with a column that is not in it, so a new report column
//! without a title fails every test that writes a report instead of
//! showing up in snake_case.
//!
//! It is also the one place a column's kind is said, for every named
//! command's columns, not only the page's: the batch a figure prints carries
//! each column's kind as field metadata ([`KIND_KEY`], [`ColumnKind::name`])
//! taken from here, and the terminal's table reads it there, so a column is
//! money on the terminal exactly when it is on the page.

use std::borrow::Cow;

use crate::number::{currency_unit, grouped, money};

/// How a column's cells read on the page and in the summary, and how they
/// align. The CSV holds every cell as the caller gave it, whatever its kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnKind {
    /// Words (a reason, a command line, a list of users): left-aligned,
    /// shown as given, wrapped where the page is narrow.
    Text,
    /// A short name (team, host, user, process): left-aligned, shown as
    /// given, kept on one line.
    Name,
    /// A team: a [`ColumnKind::Name`] whose key `(unallocated)` (GPU time
    /// no process held) reads in words ([`crate::team_label`]).
    Team,
    /// A number that names something (GPU index, process id): right-aligned,
    /// shown as given (no thousands separators: `4242`, not `4,242`).
    Id,
    /// A time: an RFC 3339 instant (`2026-11-02T10:00:00Z`, as the CSV
    /// holds it) shown to the minute, `2026-11-02 10:00`; anything else as
    /// the caller wrote it. Left-aligned, kept on one line.
    Time,
    /// `true` or `false`, shown as `yes` or `no`: left-aligned.
    Flag,
    /// An amount of the report's currency: right-aligned, `$1,234.56`. The
    /// title ends with the currency's symbol or code, `Idle cost ($)`.
    Money,
    /// A number in the unit its title names (kWh, MiB/s, GPUs):
    /// right-aligned, thousands separated, with the decimals the
    /// cell has: `1234.50` reads `1,234.50`. A column shows its amounts
    /// with two decimals ([`Column::display`]).
    Amount,
    /// Hours or GPU-hours: an [`ColumnKind::Amount`], shown with two
    /// decimals.
    Hours,
    /// A percentage: an [`ColumnKind::Amount`] whose title ends with `(%)`;
    /// a column shows it with one decimal ([`Column::display`]).
    Percent,
    /// A count of bytes (the CSV holds bytes), shown in GiB with one
    /// decimal: right-aligned; the title says `(GiB)`.
    Bytes,
    /// A count of minutes (the CSV holds minutes), shown in hours with one
    /// decimal: right-aligned; the title says `(hours)`.
    Minutes,
}

impl ColumnKind {
    /// Whether the column is right-aligned (it holds numbers).
    pub fn is_numeric(self) -> bool {
        matches!(
            self,
            ColumnKind::Id
                | ColumnKind::Money
                | ColumnKind::Amount
                | ColumnKind::Hours
                | ColumnKind::Percent
                | ColumnKind::Bytes
                | ColumnKind::Minutes
        )
    }

    /// The kind's name as a batch's field metadata holds it under
    /// [`KIND_KEY`]: `money`, `amount`, `percent`, …
    pub fn name(self) -> &'static str {
        match self {
            ColumnKind::Text => "text",
            ColumnKind::Name => "name",
            ColumnKind::Team => "team",
            ColumnKind::Id => "id",
            ColumnKind::Time => "time",
            ColumnKind::Flag => "flag",
            ColumnKind::Money => "money",
            ColumnKind::Amount => "amount",
            ColumnKind::Hours => "hours",
            ColumnKind::Percent => "percent",
            ColumnKind::Bytes => "bytes",
            ColumnKind::Minutes => "minutes",
        }
    }

    /// The kind named `name` ([`ColumnKind::name`]), if there is one.
    pub fn from_name(name: &str) -> Option<ColumnKind> {
        ALL_KINDS.into_iter().find(|k| k.name() == name)
    }

    /// Whether its cells are kept on one line on the page (numbers, names,
    /// times), so only words and long identifiers wrap.
    pub fn keeps_one_line(self) -> bool {
        matches!(self, ColumnKind::Name | ColumnKind::Team | ColumnKind::Time) || self.is_numeric()
    }

    /// `cell` (as the CSV holds it) as a reader sees it in a column of this
    /// kind, its number read from its text ([`ColumnKind::show`]).
    pub fn display<'a>(self, cell: &'a str, currency: &str) -> Cow<'a, str> {
        self.show(cell, number_in(cell), currency)
    }

    /// `cell` (as the CSV holds it), whose number is `number` (as the
    /// caller computed it; `None` for text or null), as a reader sees it in
    /// a column of this kind: a numeric kind formats `number`, amounts of
    /// money in `currency` (an ISO 4217 code). A cell without a (finite)
    /// number where one is expected (empty for null, `n/a`) is shown as it
    /// is.
    pub fn show<'a>(self, cell: &'a str, number: Option<f64>, currency: &str) -> Cow<'a, str> {
        let number = || number.filter(|v| v.is_finite());
        match self {
            ColumnKind::Text | ColumnKind::Name | ColumnKind::Id => Cow::Borrowed(cell),
            ColumnKind::Time => chrono::DateTime::parse_from_rfc3339(cell.trim())
                .map_or(Cow::Borrowed(cell), |t| {
                    Cow::Owned(t.naive_utc().format("%Y-%m-%d %H:%M").to_string())
                }),
            ColumnKind::Team => Cow::Borrowed(crate::team::team_label(cell)),
            ColumnKind::Flag => match cell {
                "true" => Cow::Borrowed("yes"),
                "false" => Cow::Borrowed("no"),
                _ => Cow::Borrowed(cell),
            },
            ColumnKind::Money => number().map_or(Cow::Borrowed(cell), |v| Cow::Owned(money(v, currency))),
            ColumnKind::Amount | ColumnKind::Hours | ColumnKind::Percent => {
                let decimals = cell.trim().split_once('.').map_or(0, |(_, fraction)| fraction.len());
                number().map_or(Cow::Borrowed(cell), |v| Cow::Owned(grouped(v, decimals)))
            }
            ColumnKind::Bytes => {
                number().map_or(Cow::Borrowed(cell), |v| Cow::Owned(grouped(v / f64::from(1u32 << 30), 1)))
            }
            ColumnKind::Minutes => number().map_or(Cow::Borrowed(cell), |v| Cow::Owned(grouped(v / 60.0, 1))),
        }
    }
}

/// One report column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Column {
    /// The column's name in the table and its CSV header, e.g. `"idle_cost"`.
    pub name: &'static str,
    /// What a reader calls it, with its unit unless it is money, e.g.
    /// `"Idle cost"`, `"Share (%)"`, `"Energy (kWh)"`; money columns get
    /// their currency from [`Column::title`].
    pub label: &'static str,
    /// How its cells read.
    pub kind: ColumnKind,
}

impl Column {
    /// `cell` (as the CSV holds it) as a reader sees it in this column: by
    /// its kind ([`ColumnKind::display`]), an amount with fixed decimals,
    /// one for a percentage and two for anything else (`0` reads `0.00`,
    /// `0.1333…` reads `0.13`).
    pub fn display<'a>(&self, cell: &'a str, currency: &str) -> Cow<'a, str> {
        self.show(cell, number_in(cell), currency)
    }

    /// `cell` (as the CSV holds it), whose number is `number` (as the
    /// caller computed it; `None` for text or null), as a reader sees it in
    /// this column: as [`Column::display`] says, formatting `number`.
    pub fn show<'a>(&self, cell: &'a str, number: Option<f64>, currency: &str) -> Cow<'a, str> {
        match (self.kind, number.filter(|v| v.is_finite())) {
            (ColumnKind::Amount | ColumnKind::Hours, Some(v)) => Cow::Owned(grouped(v, 2)),
            (ColumnKind::Percent, Some(v)) => Cow::Owned(grouped(v, 1)),
            _ => self.kind.show(cell, number, currency),
        }
    }

    /// The title the page and the summary show, e.g. `"Idle cost ($)"` for
    /// `currency` `"USD"`, `"Idle cost (CHF)"` for `"CHF"`, `"Share (%)"`.
    pub fn title(&self, currency: &str) -> String {
        match (self.kind, currency_unit(currency)) {
            (ColumnKind::Money, Some(unit)) => format!("{} ({unit})", self.label),
            _ => self.label.to_owned(),
        }
    }
}

/// The number a cell's text states (`1234.5`), if it states a finite one:
/// for a table given as text alone ([`super::TableData::numbers`]).
pub(super) fn number_in(cell: &str) -> Option<f64> {
    cell.trim().parse::<f64>().ok().filter(|v| v.is_finite())
}

/// The key of a batch's field metadata that holds the column's kind
/// ([`ColumnKind::name`]).
pub const KIND_KEY: &str = "apron.kind";

/// Every kind, for [`ColumnKind::from_name`].
const ALL_KINDS: [ColumnKind; 12] = [
    ColumnKind::Text,
    ColumnKind::Name,
    ColumnKind::Team,
    ColumnKind::Id,
    ColumnKind::Time,
    ColumnKind::Flag,
    ColumnKind::Money,
    ColumnKind::Amount,
    ColumnKind::Hours,
    ColumnKind::Percent,
    ColumnKind::Bytes,
    ColumnKind::Minutes,
];

const fn col(name: &'static str, label: &'static str, kind: ColumnKind) -> Column {
    Column { name, label, kind }
}

/// Every column of every report table and every named command's printed
/// rows, by name.
pub const COLUMNS: &[Column] = &[
    // Who and where.
    col("team", "Team", ColumnKind::Team),
    col("host", "Host", ColumnKind::Name),
    col("gpu_index", "GPU", ColumnKind::Id),
    col("gpu_uuid", "GPU UUID", ColumnKind::Text),
    col("user", "User", ColumnKind::Name),
    col("comm", "Process", ColumnKind::Name),
    col("pid", "PID", ColumnKind::Id),
    col("held_by", "Held by", ColumnKind::Text),
    col("allocated_to", "Allocated to", ColumnKind::Text),
    // Time on the GPUs.
    col("gpu_hours", "GPU-hours", ColumnKind::Hours),
    col("busy_gpu_hours", "Busy GPU-hours", ColumnKind::Hours),
    col("idle_gpu_hours", "Idle GPU-hours", ColumnKind::Hours),
    col("idle_held_gpu_hours", "Idle-held GPU-hours", ColumnKind::Hours),
    col("idle_empty_gpu_hours", "Idle-empty GPU-hours", ColumnKind::Hours),
    col("unknown_gpu_hours", "Unknown GPU-hours", ColumnKind::Hours),
    col("reclaim_gpu_hours", "Reclaim GPU-hours", ColumnKind::Hours),
    col("zombie_gpu_hours", "Zombie GPU-hours", ColumnKind::Hours),
    col("freed_gpu_hours", "Freed GPU-hours", ColumnKind::Hours),
    col("freed_held_gpu_hours", "Freed, held GPU-hours", ColumnKind::Hours),
    col("freed_empty_gpu_hours", "Freed, already free GPU-hours", ColumnKind::Hours),
    col("idle_minutes", "Idle for (hours)", ColumnKind::Minutes),
    col("idle_since", "Idle since (UTC)", ColumnKind::Time),
    col("allocated_since", "Allocated since (UTC)", ColumnKind::Time),
    col("proc_start", "Process start (UTC)", ColumnKind::Time),
    col("still_running", "Still running (at the data's end)", ColumnKind::Flag),
    col("still_idle", "Still idle (at the data's end)", ColumnKind::Flag),
    // Energy and memory.
    col("energy_kwh", "Energy (kWh)", ColumnKind::Amount),
    col("used_mem_bytes", "Memory (GiB)", ColumnKind::Bytes),
    // Money.
    col("cost", "Cost", ColumnKind::Money),
    col("busy_cost", "Busy cost", ColumnKind::Money),
    col("idle_cost", "Idle cost", ColumnKind::Money),
    col("unknown_cost", "Unknown cost", ColumnKind::Money),
    col("reclaim_cost", "Reclaim cost", ColumnKind::Money),
    col("zombie_cost", "Zombie cost", ColumnKind::Money),
    col("freed_cost", "Freed capacity at cost", ColumnKind::Money),
    col("freed_held_cost", "Of it held by someone", ColumnKind::Money),
    col("freed_empty_cost", "Of it already free", ColumnKind::Money),
    col("cash_energy_cost", "Cash not spent: energy", ColumnKind::Money),
    col("cash_ops_cost", "Cash not spent: operating", ColumnKind::Money),
    col("share_pct", "Share (%)", ColumnKind::Percent),
    col("freed_pct_of_idle", "Freed of idle (%)", ColumnKind::Percent),
    // Budgets.
    col("budget", "Budget", ColumnKind::Money),
    col("spent", "Spent", ColumnKind::Money),
    col("used_pct", "Used (%)", ColumnKind::Percent),
    col("budget_used_pct", "Budget used (%)", ColumnKind::Percent),
    col("forecast", "Forecast", ColumnKind::Money),
    col("forecast_pct", "Forecast (%)", ColumnKind::Percent),
    col("exceeded_at", "Over budget since (UTC)", ColumnKind::Time),
    col("forecast_exceeded_at", "Forecast over budget at (UTC)", ColumnKind::Time),
    // Actions.
    col("action", "Action", ColumnKind::Text),
    col("worth", "Worth", ColumnKind::Money),
    col("because", "Because", ColumnKind::Text),
    col("how", "Command", ColumnKind::Text),
    // Alerts.
    col("rule", "Rule", ColumnKind::Name),
    col("value", "Value", ColumnKind::Amount),
    col("unit", "Unit", ColumnKind::Name),
    col("since", "Since (UTC)", ColumnKind::Time),
    // MIG instances.
    col("parent_gpu_uuid", "Parent GPU UUID", ColumnKind::Text),
    col("mig_profile", "MIG profile", ColumnKind::Name),
    // Starved GPUs.
    col("activity_pct", "Activity (%)", ColumnKind::Percent),
    col("pcie_rx_mib_per_s", "PCIe in (MiB/s)", ColumnKind::Amount),
    col("pcie_tx_mib_per_s", "PCIe out (MiB/s)", ColumnKind::Amount),
    // The hour of the week and idle windows.
    col("dow", "Day", ColumnKind::Name),
    col("hour", "Hour", ColumnKind::Id),
    col("mean_util_pct", "Mean utilisation (%)", ColumnKind::Percent),
    col("idle_share_pct", "Idle share (%)", ColumnKind::Percent),
    col("idle_gpu_hours_per_week", "Idle GPU-hours per week", ColumnKind::Hours),
    col("idle_cost_per_week", "Idle cost per week", ColumnKind::Money),
    col("gpus", "GPUs", ColumnKind::Amount),
    col("weeks", "Weeks", ColumnKind::Amount),
    col("window", "Window", ColumnKind::Name),
    col("hours_per_week", "Hours per week", ColumnKind::Hours),
    col("text", "In words", ColumnKind::Text),
    // Faults.
    col("kind", "Kind", ColumnKind::Name),
    col("xid", "XID", ColumnKind::Id),
    col("fault", "Fault", ColumnKind::Text),
    col("drain", "Drain", ColumnKind::Flag),
    col("events", "Events", ColumnKind::Id),
    col("first_at", "First (UTC)", ColumnKind::Time),
    col("last_at", "Last (UTC)", ColumnKind::Time),
    col("on_gpu", "Processes on the GPU", ColumnKind::Text),
    col("down_gpu_hours", "Down GPU-hours", ColumnKind::Hours),
    col("down_cost", "Down cost", ColumnKind::Money),
    col("still_down", "Still down (at the data's end)", ColumnKind::Flag),
    // Jobs.
    col("job", "Job", ColumnKind::Name),
    col("hosts", "Hosts", ColumnKind::Text),
    col("gpu_count", "GPUs held", ColumnKind::Id),
    col("gpu_list", "Which GPUs", ColumnKind::Text),
    col("start", "Start (UTC)", ColumnKind::Time),
    col("end", "End (UTC)", ColumnKind::Time),
    col("sm_active_pct", "SM active (%)", ColumnKind::Percent),
    col("tensor_active_pct", "Tensor active (%)", ColumnKind::Percent),
    col("dram_active_pct", "DRAM active (%)", ColumnKind::Percent),
    col("peak_mem_bytes", "Peak memory (GiB)", ColumnKind::Bytes),
    col("peak_mem_pct", "Peak memory, of the GPU's (%)", ColumnKind::Percent),
    col("grade", "Grade", ColumnKind::Name),
    col("findings", "Findings", ColumnKind::Text),
];

/// The column named `name`, if a report table may have it.
pub fn column(name: &str) -> Option<&'static Column> {
    COLUMNS.iter().find(|c| c.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn titles_carry_units() {
        let title = |name: &str, currency: &str| column(name).expect("a known column").title(currency);
        assert_eq!(title("gpu_hours", "USD"), "GPU-hours");
        assert_eq!(title("idle_cost", "USD"), "Idle cost ($)");
        assert_eq!(title("idle_cost", "EUR"), "Idle cost (€)");
        assert_eq!(title("idle_cost", "CHF"), "Idle cost (CHF)");
        assert_eq!(title("idle_cost", ""), "Idle cost");
        assert_eq!(title("share_pct", "USD"), "Share (%)");
        assert_eq!(title("energy_kwh", "USD"), "Energy (kWh)");
        assert!(column("no_such_column").is_none());
    }

    #[test]
    fn the_table_says_each_column_once_and_each_unit_in_its_title() {
        let mut names = HashSet::new();
        for c in COLUMNS {
            assert!(names.insert(c.name), "{} is listed twice", c.name);
            assert!(!c.label.contains('_') && c.label != c.name, "{}: a title, not the name", c.name);
            // The name's unit suffix and the title's unit say the same.
            let unit = if c.name.ends_with("_pct") || c.name.contains("_pct_") {
                Some("(%)")
            } else if c.name.ends_with("_kwh") {
                Some("(kWh)")
            } else if c.name.ends_with("_gib") || c.name.ends_with("_bytes") {
                Some("(GiB)")
            } else if c.name.ends_with("_minutes") {
                Some("(hours)")
            } else if c.name.ends_with("gpu_hours") {
                Some("GPU-hours")
            } else if c.name.ends_with("_hours") {
                Some("(hours)")
            } else if c.name.ends_with("_at") || c.name.ends_with("_since") || c.name.ends_with("_start") {
                Some("(UTC)")
            } else {
                None
            };
            if let Some(unit) = unit {
                assert!(c.label.ends_with(unit), "{}: {:?} should end with {unit}", c.name, c.label);
            }
            if c.kind == ColumnKind::Money {
                assert!(!c.label.contains('('), "{}: the currency is added to money titles", c.name);
            }
            assert_eq!(c.kind == ColumnKind::Percent, c.label.ends_with("(%)"), "{}", c.name);
            if c.kind == ColumnKind::Hours {
                assert!(c.label.to_lowercase().contains("hours"), "{}: {:?} says hours", c.name, c.label);
            }
            assert_eq!(ColumnKind::from_name(c.kind.name()), Some(c.kind), "{}", c.name);
        }
    }

    #[test]
    fn cells_read_as_numbers_money_and_words() {
        assert_eq!(ColumnKind::Money.display("1234.5", "USD"), "$1,234.50");
        assert_eq!(ColumnKind::Money.display("-3", "CHF"), "-3.00 CHF");
        assert_eq!(ColumnKind::Money.display("", "USD"), "", "null stays empty");
        assert_eq!(ColumnKind::Amount.display("23040.00", "USD"), "23,040.00");
        assert_eq!(ColumnKind::Amount.display("1234567.8", "USD"), "1,234,567.8");
        assert_eq!(ColumnKind::Amount.display("102.6", "USD"), "102.6");
        assert_eq!(ColumnKind::Amount.display("-0.08", "USD"), "-0.08");
        assert_eq!(ColumnKind::Amount.display("7", "USD"), "7");
        assert_eq!(ColumnKind::Amount.display("n/a", "USD"), "n/a");
        assert_eq!(ColumnKind::Id.display("4242", "USD"), "4242");
        assert_eq!(ColumnKind::Flag.display("true", "USD"), "yes");
        assert_eq!(ColumnKind::Flag.display("false", "USD"), "no");
        assert_eq!(ColumnKind::Text.display("12.5", "USD"), "12.5");
        assert_eq!(ColumnKind::Team.display("(unallocated)", "USD"), "no one (GPU empty)");
        assert_eq!(ColumnKind::Team.display("nlp", "USD"), "nlp");
        assert_eq!(ColumnKind::Bytes.display("1610612736", "USD"), "1.5");
        assert_eq!(ColumnKind::Minutes.display("90", "USD"), "1.5");
        assert_eq!(ColumnKind::Time.display("2026-11-02T10:05:00Z", "USD"), "2026-11-02 10:05");
        assert_eq!(ColumnKind::Time.display("2026-11-02T10:05:30.250Z", "USD"), "2026-11-02 10:05");
        assert_eq!(ColumnKind::Time.display("2026-11-02 10:05", "USD"), "2026-11-02 10:05");
        let column = |name: &str| *column(name).expect("a known column");
        assert_eq!(column("gpu_hours").display("0", "USD"), "0.00");
        assert_eq!(column("gpu_hours").display("0.13333333333333333", "USD"), "0.13");
        assert_eq!(column("share_pct").display("34.642857142857146", "USD"), "34.6");
        assert_eq!(column("cost").display("0.9704", "USD"), "$0.97");
        assert_eq!(column("gpu_hours").display("", "USD"), "");
        assert!(
            ColumnKind::Money.is_numeric() && ColumnKind::Amount.is_numeric() && ColumnKind::Id.is_numeric()
        );
        assert!(
            !ColumnKind::Text.is_numeric()
                && !ColumnKind::Time.is_numeric()
                && !ColumnKind::Flag.is_numeric()
        );
        assert!(
            ColumnKind::Name.keeps_one_line()
                && ColumnKind::Money.keeps_one_line()
                && !ColumnKind::Text.keeps_one_line()
        );
    }
}
