//! Savings: the period replayed with the stretches ended by rules, what
//! would it have freed? A GPU idle longer than the reclaim rule is taken
//! back from then on; a zombie that has held memory on its idle GPU longer
//! than the zombie rule is ended from then on (a process starved of data is
//! no zombie: [`super::zombies::is_starved`]). Each GPU-minute they would
//! have freed is counted once, with its cost and its team (the ledger's
//! pass: [`crate::ledger::Ledger::reclaimed`] and
//! [`crate::ledger::Ledger::zombie_freed`]), against the period's idle cost
//! ([`super::spend`]).

use std::time::Duration;

use apron_reports::{grouped, money};
use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::error::ArrowError;

use super::Report;
use super::spend::Spend;
use crate::columns::{self, batch_of};
use crate::error::Error;
use crate::figures::zombies::is_starved;
use crate::header::hours;
use crate::ledger::{Reclaimed, ZombieFreed};
use crate::output::Rows;
use crate::rounding::{cents_keeping_total, round_to};

/// One team's savings, money to the cent.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SavingsLine {
    pub team: String,
    /// Freed by reclaiming GPUs idle longer than the rule.
    pub reclaim_gpu_hours: f64,
    pub reclaim_cost: f64,
    /// Freed by ending zombies after the rule.
    pub zombie_gpu_hours: f64,
    pub zombie_cost: f64,
    /// Both, each GPU-minute once.
    pub freed_gpu_hours: f64,
    pub freed_cost: f64,
    /// The team's idle cost in the period (as `spend` gives it).
    pub idle_cost: f64,
}

impl SavingsLine {
    /// The freed cost as a share of the idle cost (%); `None` with no idle cost.
    pub fn of_idle_pct(&self) -> Option<f64> {
        (self.idle_cost > 0.0).then(|| 100.0 * self.freed_cost / self.idle_cost)
    }
}

/// What ending the stretches by the rules would have freed in a period.
#[derive(Debug, Clone, PartialEq)]
pub struct Savings {
    /// The rules: reclaim after, end zombies after.
    pub reclaim_after: Duration,
    pub zombie_after: Duration,
    /// One row per team with idle cost or something freed, most freed first.
    pub rows: Vec<SavingsLine>,
    /// The fleet: the rows added up.
    pub total: SavingsLine,
}

impl Savings {
    /// The header line: `Savings:  reclaiming GPUs after 2h idle and ending
    /// zombies after 30m would have freed 1,204.5 GPU-hours, $1,250.00 of
    /// the $9,817.86 idle cost (12.7%)`.
    pub fn header_line(&self, currency: &str) -> String {
        let t = &self.total;
        format!(
            "Savings:  reclaiming GPUs after {} idle and ending zombies after {} would have freed {} GPU-hours, {} of the {} idle cost ({:.1}%)",
            humantime::format_duration(self.reclaim_after),
            humantime::format_duration(self.zombie_after),
            hours(t.freed_gpu_hours),
            money(t.freed_cost, currency),
            money(t.idle_cost, currency),
            t.of_idle_pct().unwrap_or(0.0)
        )
    }

    /// The freed cost in one phrase: `$1,250.00 (1,204 GPU-hours)`.
    pub fn freed_phrase(&self, currency: &str) -> String {
        format!(
            "{} ({} GPU-hours)",
            money(self.total.freed_cost, currency),
            grouped(self.total.freed_gpu_hours, 0)
        )
    }
}

/// The savings of `report` (costs registered, its ledger found by the
/// rules `reclaim_after` and `zombie_after`), against `spend`'s idle costs.
/// Processes starved of data ([`is_starved`] by the config's threshold)
/// are not zombies: ending them frees nothing here.
pub fn savings(
    report: &Report,
    spend: &Spend,
    reclaim_after: Duration,
    zombie_after: Duration,
) -> Result<Savings, Error> {
    let Some(ledger) = &report.ledger else {
        return of_parts(&[], &[], spend, reclaim_after, zombie_after);
    };
    let threshold = report.config.zombie.starved_pcie_mib_per_s;
    let zombies: Vec<(&str, ZombieFreed)> = ledger
        .zombies
        .iter()
        .zip(&ledger.zombie_freed)
        .filter(|(row, _)| !is_starved(row, threshold))
        .map(|(row, freed)| (row.team.as_str(), *freed))
        .collect();
    of_parts(&ledger.reclaimed, &zombies, spend, reclaim_after, zombie_after)
}

/// [`savings`] from what reclaiming would have freed per team and what
/// ending each zombie would have (its team's).
pub fn of_parts(
    reclaimed: &[Reclaimed],
    zombies: &[(&str, ZombieFreed)],
    spend: &Spend,
    reclaim_after: Duration,
    zombie_after: Duration,
) -> Result<Savings, Error> {
    let mut rows: Vec<SavingsLine> = Vec::new();
    for r in reclaimed {
        let l = line(&mut rows, &r.team, spend);
        l.reclaim_gpu_hours += r.gpu_hours;
        l.reclaim_cost += r.cost;
        l.freed_gpu_hours += r.gpu_hours;
        l.freed_cost += r.cost;
    }
    for (team, z) in zombies {
        let l = line(&mut rows, team, spend);
        l.zombie_gpu_hours += z.freed.0;
        l.zombie_cost += z.freed.1;
        l.freed_gpu_hours += z.alone.0;
        l.freed_cost += z.alone.1;
    }
    for r in spend.rows.iter().filter(|r| r.idle_cost > 0.0) {
        line(&mut rows, &r.team, spend);
    }
    // Money to the cent, each column keeping its total.
    for column in [
        (|l: &mut SavingsLine| &mut l.reclaim_cost) as fn(&mut SavingsLine) -> &mut f64,
        |l| &mut l.zombie_cost,
        |l| &mut l.freed_cost,
    ] {
        let exact: Vec<f64> = rows.iter_mut().map(|l| *column(l)).collect();
        for (l, cents) in rows.iter_mut().zip(cents_keeping_total(&exact)?) {
            *column(l) = cents as f64 / 100.0;
        }
    }
    rows.sort_by(|a, b| {
        b.freed_cost
            .total_cmp(&a.freed_cost)
            .then(b.idle_cost.total_cmp(&a.idle_cost))
            .then(a.team.cmp(&b.team))
    });
    let sum = |f: fn(&SavingsLine) -> f64| rows.iter().map(f).sum::<f64>();
    let cents = |v: f64| round_to(v, 2);
    let total = SavingsLine {
        team: "(total)".to_owned(),
        reclaim_gpu_hours: sum(|l| l.reclaim_gpu_hours),
        reclaim_cost: cents(sum(|l| l.reclaim_cost)),
        zombie_gpu_hours: sum(|l| l.zombie_gpu_hours),
        zombie_cost: cents(sum(|l| l.zombie_cost)),
        freed_gpu_hours: sum(|l| l.freed_gpu_hours),
        freed_cost: cents(sum(|l| l.freed_cost)),
        idle_cost: spend.totals.idle_cost,
    };
    Ok(Savings { reclaim_after, zombie_after, rows, total })
}

/// The line of `team` in `rows`, added (with its idle cost from `spend`)
/// if it is not there yet.
fn line<'a>(rows: &'a mut Vec<SavingsLine>, team: &str, spend: &Spend) -> &'a mut SavingsLine {
    let i = match rows.iter().position(|l| l.team == team) {
        Some(i) => i,
        None => {
            let idle_cost = spend.rows.iter().find(|r| r.team == team).map_or(0.0, |r| r.idle_cost);
            rows.push(SavingsLine { team: team.to_owned(), idle_cost, ..SavingsLine::default() });
            rows.len() - 1
        }
    };
    &mut rows[i]
}

impl Rows for Savings {
    /// Hours to 2 decimals, money to the cent, shares to 0.1%; the fleet's
    /// total last.
    fn to_batch(&self) -> Result<RecordBatch, ArrowError> {
        let r: Vec<&SavingsLine> = self.rows.iter().chain(std::iter::once(&self.total)).collect();
        let h = |f: fn(&SavingsLine) -> f64| columns::float(r.iter().map(|l| round_to(f(l), 2)));
        batch_of(vec![
            ("team", columns::text(r.iter().map(|l| l.team.as_str()))),
            ("reclaim_gpu_hours", h(|l| l.reclaim_gpu_hours)),
            ("reclaim_cost", h(|l| l.reclaim_cost)),
            ("zombie_gpu_hours", h(|l| l.zombie_gpu_hours)),
            ("zombie_cost", h(|l| l.zombie_cost)),
            ("freed_gpu_hours", h(|l| l.freed_gpu_hours)),
            ("freed_cost", h(|l| l.freed_cost)),
            ("idle_cost", h(|l| l.idle_cost)),
            ("freed_pct_of_idle", columns::float(r.iter().map(|l| l.of_idle_pct().map(|p| round_to(p, 1))))),
        ])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::figures::spend::{SpendRow, Totals};

    fn spend(idle: &[(&str, f64)]) -> Spend {
        let row = |&(team, idle_cost): &(&str, f64)| SpendRow {
            team: team.to_owned(),
            gpu_hours: 0.0,
            busy_gpu_hours: 0.0,
            idle_held_gpu_hours: 0.0,
            idle_empty_gpu_hours: 0.0,
            unknown_gpu_hours: 0.0,
            energy_kwh: None,
            cost: idle_cost,
            busy_cost: 0.0,
            idle_cost,
            unknown_cost: 0.0,
            share_pct: 0.0,
            budget: None,
            budget_used_pct: None,
            forecast: None,
        };
        let totals = Totals {
            cost: 0.0,
            idle_cost: idle.iter().map(|(_, c)| c).sum(),
            unknown_cost: 0.0,
            gpu_hours: 0.0,
            busy_gpu_hours: 0.0,
            idle_held_gpu_hours: 0.0,
            idle_empty_gpu_hours: 0.0,
            unknown_gpu_hours: 0.0,
            energy_kwh: 0.0,
        };
        Spend { rows: idle.iter().map(row).collect(), totals, budgets: None }
    }

    /// vision: reclaiming frees 1 h ($10.004); its zombie 0.5 h ($5), of
    /// which 0.25 h ($2.503) reclaiming does not: 12.507 freed in all. nlp:
    /// a zombie alone, 0.1 h ($1.001). (unallocated) idle but nothing freed.
    /// To the cent keeping each column's total: 10.00 / 0.00 / 0.00 (10.00);
    /// 5.00 + 1.00 (6.00); freed 12.507 + 1.001 = 13.508 → 13.51: 12.51 + 1.00.
    #[test]
    fn each_minute_is_freed_once_and_money_keeps_its_totals() {
        let reclaimed = [Reclaimed { team: "vision".into(), gpu_hours: 1.0, cost: 10.004 }];
        let zombies = [
            ("vision", ZombieFreed { freed: (0.5, 5.0), alone: (0.25, 2.503) }),
            ("nlp", ZombieFreed { freed: (0.1, 1.001), alone: (0.1, 1.001) }),
        ];
        let spend = spend(&[("vision", 20.0), ("nlp", 2.0), ("(unallocated)", 8.0)]);
        let hour = Duration::from_secs(3600);
        let s = of_parts(&reclaimed, &zombies, &spend, hour, hour).expect("no overflow");
        let got: Vec<(&str, f64, f64, f64, f64)> = s
            .rows
            .iter()
            .map(|l| (l.team.as_str(), l.reclaim_cost, l.zombie_cost, l.freed_cost, l.freed_gpu_hours))
            .collect();
        assert_eq!(
            got,
            [
                ("vision", 10.0, 5.0, 12.51, 1.25),
                ("nlp", 0.0, 1.0, 1.0, 0.1),
                ("(unallocated)", 0.0, 0.0, 0.0, 0.0)
            ]
        );
        assert_eq!((s.total.freed_cost, s.total.idle_cost), (13.51, 30.0));
        assert_eq!(s.rows[0].of_idle_pct(), Some(100.0 * 12.51 / 20.0));
    }
}
