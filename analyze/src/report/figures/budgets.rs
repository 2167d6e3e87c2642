//! Budgets: what each team with a `[[team]] budget_per_month` has spent of
//! it in a calendar month (UTC), and what it will have spent by the month's
//! end if the rest of the month goes as the month so far went, hour of the
//! week by hour of the week (`queries/budget_hours.sql` over
//! `cost_buckets`).
//!
//! The forecast is [`forecast`], a pure function of the hours recorded.
//! Each hour of the week (Monday 00:00 UTC, Monday 01:00, …) has the team's
//! mean cost over the recorded hours of the month that fell on it; an hour
//! of the week the month has not recorded yet has the team's mean hour.
//! The hours from the data's end to the month's end are summed at those
//! means. A month that is over (now is past its end, or the data reaches
//! it) forecasts what it spent.

use std::collections::BTreeMap;

use apron_reports::money;
use apron_schemas::time::HOUR_MS;
use chrono::{DateTime, Datelike, Timelike};
use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::error::ArrowError;

use super::{query, unreadable};
use crate::config::Config;
use crate::error::Error;
use crate::output::Rows;
use crate::report::columns::{self, Columns, batch_of};
use crate::report::period::{Period, month_holding, show_ms};
use crate::session::Session;
use crate::session::queries;

/// Hours in a week.
const WEEK_HOURS: usize = 7 * 24;

/// One team's budget in one month.
#[derive(Debug, Clone, PartialEq)]
pub struct BudgetRow {
    /// The team.
    pub team: String,
    /// Its budget for the month (currency).
    pub budget: f64,
    /// What it spent in the month so far (currency, exact).
    pub spent: f64,
    /// What it will have spent by the month's end (currency); `spent` when
    /// the month is over.
    pub forecast: f64,
    /// The hour in which its spend passed the budget (start, ms since the
    /// epoch); `None` while it has not.
    pub exceeded_at: Option<i64>,
    /// The hour in which the forecast passes the budget (start, ms), the
    /// same as `exceeded_at` once it has; `None` when the forecast stays
    /// within it.
    pub forecast_exceeded_at: Option<i64>,
}

impl BudgetRow {
    /// Spent as a share of the budget (%); `None` for a budget of 0.
    pub fn used_pct(&self) -> Option<f64> {
        (self.budget > 0.0).then(|| 100.0 * self.spent / self.budget)
    }

    /// The forecast as a share of the budget (%); `None` for a budget of 0.
    pub fn forecast_pct(&self) -> Option<f64> {
        (self.budget > 0.0).then(|| 100.0 * self.forecast / self.budget)
    }

    /// The row in one line, money in `currency`: `vision: $4,120.00 of
    /// $5,000.00 (82.4%), forecast $6,010.00 (120.2%), over budget from
    /// 2026-11-24 13:00`.
    pub fn sentence(&self, currency: &str, month_over: bool) -> String {
        let pct = |p: Option<f64>| p.map_or(String::new(), |p| format!(" ({p:.1}%)"));
        let mut line = format!(
            "{}: {} of {}{}",
            self.team,
            money(self.spent, currency),
            money(self.budget, currency),
            pct(self.used_pct())
        );
        if !month_over {
            line.push_str(&format!(
                ", forecast {}{}",
                money(self.forecast, currency),
                pct(self.forecast_pct())
            ));
        }
        match (self.exceeded_at, self.forecast_exceeded_at) {
            (Some(at), _) => line.push_str(&format!(", over budget since {}", show_ms(at))),
            (None, Some(at)) => line.push_str(&format!(", over budget by {} at this rate", show_ms(at))),
            (None, None) => {}
        }
        line
    }
}

/// The budgets of one month.
#[derive(Debug, Clone, PartialEq)]
pub struct Budgets {
    /// The month: its first hour and the next month's (ms since the epoch).
    pub month: Period,
    /// Where the data the forecast starts from ends (ms): the end of its
    /// last recorded minute, at most the month's end.
    pub data_end_ms: i64,
    /// Whether the month is over: no forecast beyond what was spent.
    pub over: bool,
    /// One row per team with a budget, in the config's order.
    pub rows: Vec<BudgetRow>,
}

impl Budgets {
    /// The rows whose spend passed the budget.
    pub fn exceeded(&self) -> impl Iterator<Item = &BudgetRow> {
        self.rows.iter().filter(|r| r.exceeded_at.is_some())
    }

    /// The rows whose forecast, but not yet spend, passes the budget.
    pub fn forecast_exceeded(&self) -> impl Iterator<Item = &BudgetRow> {
        self.rows.iter().filter(|r| r.exceeded_at.is_none() && r.forecast_exceeded_at.is_some())
    }

    /// The header lines: `Budgets:  vision: …` then one line per further team.
    pub fn header_lines(&self, currency: &str) -> Vec<String> {
        self.rows
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let label = if i == 0 { "Budgets:  " } else { "          " };
                format!("{label}{}", r.sentence(currency, self.over))
            })
            .collect()
    }

    /// The row of `team`, if it has a budget.
    pub fn of(&self, team: &str) -> Option<&BudgetRow> {
        self.rows.iter().find(|r| r.team == team)
    }
}

/// The calendar month (UTC) `period` is, if it is exactly one.
pub fn month_of(period: &Period) -> Option<Period> {
    month_holding(period.start_ms).filter(|month| month == period)
}

/// The budgets of `month` over `session`, whose `cost_buckets` hold the
/// month so far (from its start to `data_end_ms` at least); `now_ms` says
/// whether the month is over.
pub async fn budgets(
    session: &Session,
    config: &Config,
    month: Period,
    data_end_ms: i64,
    now_ms: i64,
) -> Result<Budgets, Error> {
    let batch = query(session, queries::BUDGET_HOURS, Vec::new()).await?;
    let hours = read(&batch).map_err(unreadable)?;
    Ok(of_hours(config, month, data_end_ms, now_ms, &hours))
}

/// One row of `queries/budget_hours.sql`.
#[derive(Debug, Clone, PartialEq)]
pub struct TeamHour {
    pub team: String,
    /// The hour's start, ms since the epoch.
    pub hour: i64,
    pub cost: f64,
}

fn read(batch: &RecordBatch) -> Result<Vec<TeamHour>, ArrowError> {
    let c = Columns::of(batch);
    let (team, hour, cost) = (c.text("team")?, c.timestamp_ms("hour")?, c.f64_opt("cost")?);
    Ok((0..c.len())
        .map(|i| TeamHour { team: team[i].clone(), hour: hour[i], cost: cost[i].unwrap_or(0.0) })
        .collect())
}

/// The budgets of `month` from its hours recorded so far (`hours`, every
/// team's; hours outside the month are left out), the data ending at
/// `data_end_ms`.
pub fn of_hours(
    config: &Config,
    month: Period,
    data_end_ms: i64,
    now_ms: i64,
    hours: &[TeamHour],
) -> Budgets {
    let hours: Vec<&TeamHour> =
        hours.iter().filter(|h| h.hour >= month.start_ms && h.hour < month.end_ms).collect();
    let data_end_ms = data_end_ms.clamp(month.start_ms, month.end_ms);
    let over = now_ms >= month.end_ms || data_end_ms >= month.end_ms;
    // Every hour recorded, by any team: a team's hour without a row cost it 0.
    let recorded: Vec<i64> = {
        let mut all: Vec<i64> = hours.iter().map(|h| h.hour).collect();
        all.sort_unstable();
        all.dedup();
        all
    };
    let rows = config
        .team
        .iter()
        .filter_map(|team| {
            let budget = team.budget_per_month?;
            let spent_by_hour: BTreeMap<i64, f64> =
                hours.iter().filter(|h| h.team == team.name).fold(BTreeMap::new(), |mut m, h| {
                    *m.entry(h.hour).or_default() += h.cost;
                    m
                });
            let spent: f64 = spent_by_hour.values().sum();
            let exceeded_at = passes(spent_by_hour.iter().map(|(&h, &c)| (h, c)), 0.0, budget);
            let (forecast, forecast_exceeded_at) = if over {
                (spent, exceeded_at)
            } else {
                let ahead = forecast(&recorded, &spent_by_hour, data_end_ms, month.end_ms);
                let total = spent + ahead.iter().map(|(_, c)| c).sum::<f64>();
                let at = exceeded_at.or_else(|| passes(ahead.into_iter(), spent, budget));
                (total, at)
            };
            Some(BudgetRow {
                team: team.name.clone(),
                budget,
                spent,
                forecast,
                exceeded_at,
                forecast_exceeded_at,
            })
        })
        .collect();
    Budgets { month, data_end_ms, over, rows }
}

/// The first hour in which `start` plus the costs of `hours` so far goes
/// above `budget`.
fn passes(hours: impl Iterator<Item = (i64, f64)>, start: f64, budget: f64) -> Option<i64> {
    let mut sum = start;
    if sum > budget {
        return None;
    }
    for (hour, cost) in hours {
        sum += cost;
        if sum > budget {
            return Some(hour);
        }
    }
    None
}

/// The hour of the week of the hour starting at `ms`: 0 for Monday 00:00 UTC.
fn hour_of_week(ms: i64) -> usize {
    DateTime::from_timestamp_millis(ms)
        .map_or(0, |t| t.weekday().num_days_from_monday() as usize * 24 + t.hour() as usize)
}

/// The expected cost of each hour from `from_ms` to `to_ms` (the first and
/// last in part, by the share of them inside), at the team's mean cost of
/// that hour of the week over the `recorded` hours (`spent` its costs by
/// hour). The hour holding `from_ms`, recorded only in part, is not one of
/// the means.
pub fn forecast(recorded: &[i64], spent: &BTreeMap<i64, f64>, from_ms: i64, to_ms: i64) -> Vec<(i64, f64)> {
    let partial = from_ms - from_ms.rem_euclid(HOUR_MS);
    let mut sums = [0.0; WEEK_HOURS];
    let mut counts = [0u32; WEEK_HOURS];
    let (mut total, mut n) = (0.0, 0u32);
    for &hour in recorded.iter().filter(|&&h| h != partial || from_ms == partial) {
        let cost = spent.get(&hour).copied().unwrap_or(0.0);
        let slot = hour_of_week(hour);
        sums[slot] += cost;
        counts[slot] += 1;
        total += cost;
        n += 1;
    }
    if n == 0 {
        return Vec::new();
    }
    let mean = total / f64::from(n);
    let mut out = Vec::new();
    let mut hour = partial;
    while hour < to_ms {
        let inside = (hour + HOUR_MS).min(to_ms) - hour.max(from_ms);
        if inside > 0 {
            let slot = hour_of_week(hour);
            let per_hour = if counts[slot] > 0 { sums[slot] / f64::from(counts[slot]) } else { mean };
            out.push((hour, per_hour * inside as f64 / HOUR_MS as f64));
        }
        hour += HOUR_MS;
    }
    out
}

impl Rows for Budgets {
    /// Money to the cent, shares to 0.1%.
    fn to_batch(&self) -> Result<RecordBatch, ArrowError> {
        let r = &self.rows;
        let cents = |v: f64| crate::report::rounding::round_to(v, 2);
        let pct = |v: Option<f64>| v.map(|p| crate::report::rounding::round_to(p, 1));
        batch_of(vec![
            ("team", columns::text(r.iter().map(|row| row.team.as_str()))),
            ("budget", columns::float(r.iter().map(|row| Some(cents(row.budget))))),
            ("spent", columns::float(r.iter().map(|row| Some(cents(row.spent))))),
            ("used_pct", columns::float(r.iter().map(|row| pct(row.used_pct())))),
            ("forecast", columns::float(r.iter().map(|row| Some(cents(row.forecast))))),
            ("forecast_pct", columns::float(r.iter().map(|row| pct(row.forecast_pct())))),
            ("exceeded_at", columns::timestamp_ms(r.iter().map(|row| row.exceeded_at))),
            ("forecast_exceeded_at", columns::timestamp_ms(r.iter().map(|row| row.forecast_exceeded_at))),
        ])
    }
}

#[cfg(test)]
mod tests;
