//! Savings: the period replayed with the stretches ended by rules, what
//! would it have freed? A GPU idle longer than the reclaim rule is taken
//! back from then on; a zombie that has held memory on its idle GPU longer
//! than the zombie rule is ended from then on (a process starved of data is
//! no zombie: [`super::zombies::is_starved`]). Each GPU-minute they would
//! have freed is counted once, with its cost and its team (the ledger's
//! pass: [`crate::ledger::Ledger::reclaimed`] and
//! [`crate::ledger::Ledger::zombie_freed`]), against the period's idle cost
//! ([`super::spend`]).
//!
//! What is freed is capacity, valued at cost; it is not cash. It is split
//! into what someone held (a process or an allocation: reclaiming takes it
//! back) and what was already free (an empty GPU: nothing to take back, a
//! scheduler's to use), and apart from both stands the cash that would not
//! have been spent: the freed minutes' energy, and their operating cost
//! where a `[[gpu_cost]]` entry says `ops_avoidable`. The purchase's
//! write-off is spent either way.

use std::collections::HashMap;
use std::time::Duration;

use apron_reports::money;
use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::error::ArrowError;

use super::ReportContext;
use super::spend::Spend;
use crate::error::Error;
use crate::ledger::{FreedAt, Reclaimed, ZombieFreed};
use crate::output::Rows;
use crate::report::columns::{self, batch_of};
use crate::report::figures::windows::HOURS_PER_WEEK;
use crate::report::figures::zombies::is_starved;
use crate::report::header::hours;
use crate::report::rounding::{cents_keeping_total, round_to};

/// The owner of GPU time no process or allocation held.
const UNALLOCATED: &str = "(unallocated)";

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
    /// Both, each GPU-minute once: capacity freed, valued at cost.
    pub freed_gpu_hours: f64,
    pub freed_cost: f64,
    /// Of it, what someone held: taken back by reclaiming or ending.
    pub freed_held_gpu_hours: f64,
    pub freed_held_cost: f64,
    /// Of it, what was already free (idle-empty GPU time,
    /// `(unallocated)`'s): better scheduling uses it, nothing to reclaim.
    pub freed_empty_gpu_hours: f64,
    pub freed_empty_cost: f64,
    /// Cash that would not have been spent: the freed minutes' energy.
    pub cash_energy_cost: f64,
    /// And their operating cost, where the config marks it avoidable
    /// (`[[gpu_cost]] ops_avoidable`); else 0.
    pub cash_ops_cost: f64,
    /// The team's idle cost in the period (as `spend` gives it).
    pub idle_cost: f64,
}

impl SavingsLine {
    /// The freed cost as a share of the idle cost (%); `None` with no idle cost.
    pub fn of_idle_pct(&self) -> Option<f64> {
        (self.idle_cost > 0.0).then(|| 100.0 * self.freed_cost / self.idle_cost)
    }

    /// The cash not spent: energy and avoidable operating cost.
    pub fn cash(&self) -> f64 {
        self.cash_energy_cost + self.cash_ops_cost
    }
}

/// What ending the stretches by the rules would have freed in a period.
#[derive(Debug, Clone, PartialEq)]
pub struct Savings {
    /// The rules: reclaim after, end zombies after.
    pub reclaim_after: Duration,
    pub zombie_after: Duration,
    /// Whether some `[[gpu_cost]]` entry marks its operating cost avoidable.
    pub ops_avoidable: bool,
    /// One row per team with idle cost or something freed, most freed first.
    pub rows: Vec<SavingsLine>,
    /// The fleet: the rows added up.
    pub total: SavingsLine,
    /// What both rules would have freed (each GPU-minute once), by GPU UUID,
    /// then by hour of the week (168 of them, 0 = Monday 00:00 UTC), exact
    /// cost: how much of an idle window's cost they free already. A GPU's
    /// week is one block, not an entry per hour keyed by its UUID's text:
    /// thousands of GPUs make hundreds of thousands of GPU-hours.
    pub freed_at: HashMap<String, Vec<f64>>,
}

impl Savings {
    /// The header lines: what was freed, valued at cost; of it what someone
    /// held and what was already free; and the cash not spent.
    ///
    /// ```text
    /// Savings:  reclaiming GPUs after 2h idle and ending zombies after 10m would have freed 10,793.6 GPU-hours of capacity, worth $8,665.36 at cost (88.3% of the $9,817.86 idle cost):
    ///           held by someone (reclaiming takes it back) 6,400.0 GPU-hours, $5,100.00; already free on empty GPUs (a scheduler's to use, nothing to reclaim) 4,393.6 GPU-hours, $3,565.36
    ///           cash not spent: $812.40 of energy; operating cost paid either way (no [[gpu_cost]] entry has ops_avoidable = true); the purchase is written off either way
    /// ```
    pub fn header_lines(&self, currency: &str) -> Vec<String> {
        let t = &self.total;
        vec![
            format!(
                "Savings:  reclaiming GPUs after {} idle and ending zombies after {} would have freed {} GPU-hours of capacity, worth {} at cost ({:.1}% of the {} idle cost):",
                humantime::format_duration(self.reclaim_after),
                humantime::format_duration(self.zombie_after),
                hours(t.freed_gpu_hours),
                money(t.freed_cost, currency),
                t.of_idle_pct().unwrap_or(0.0),
                money(t.idle_cost, currency),
            ),
            format!("          {}", self.split_phrase(currency)),
            format!("          {}", self.cash_phrase(currency)),
        ]
    }

    /// `held by someone (reclaiming takes it back) 6,400.0 GPU-hours,
    /// $5,100.00; already free on empty GPUs (…) 4,393.6 GPU-hours, $3,565.36`.
    pub fn split_phrase(&self, currency: &str) -> String {
        let t = &self.total;
        format!(
            "held by someone (reclaiming takes it back) {} GPU-hours, {}; already free on empty GPUs (a scheduler's to use, nothing to reclaim) {} GPU-hours, {}",
            hours(t.freed_held_gpu_hours),
            money(t.freed_held_cost, currency),
            hours(t.freed_empty_gpu_hours),
            money(t.freed_empty_cost, currency),
        )
    }

    /// The cash not spent, in words: energy, and operating cost where it is
    /// avoidable.
    pub fn cash_phrase(&self, currency: &str) -> String {
        let t = &self.total;
        let ops = if self.ops_avoidable {
            format!("{} of operating cost (avoidable by the config)", money(t.cash_ops_cost, currency))
        } else {
            "operating cost paid either way (no [[gpu_cost]] entry has ops_avoidable = true)".to_owned()
        };
        format!(
            "cash not spent: {} of energy; {ops}; the purchase is written off either way",
            money(t.cash_energy_cost, currency)
        )
    }

    /// What both rules free (each GPU-minute once) on `gpus` (UUIDs) in the
    /// hours of the week `hours`, summed over the period (exact cost).
    pub fn freed_on(&self, gpus: &[&str], hours: &[usize]) -> f64 {
        gpus.iter()
            .flat_map(|g| hours.iter().map(move |h| (*g, *h)))
            .filter_map(|(g, h)| self.freed_at.get(g)?.get(h))
            .sum()
    }
}

/// Adds `cost` to `gpu`'s hour of the week `hour` in `freed_at`.
pub fn add_freed(freed_at: &mut HashMap<String, Vec<f64>>, gpu: &str, hour: usize, cost: f64) {
    let week = match freed_at.get_mut(gpu) {
        Some(week) => week,
        None => freed_at.entry(gpu.to_owned()).or_insert_with(|| vec![0.0; HOURS_PER_WEEK]),
    };
    if let Some(at) = week.get_mut(hour) {
        *at += cost;
    }
}

/// The savings of `report` (costs registered, its ledger found by the
/// rules `reclaim_after` and `zombie_after`), against `spend`'s idle costs.
/// Processes starved of data ([`is_starved`] by the config's threshold)
/// are not zombies: ending them frees nothing here.
pub fn savings(
    report: &ReportContext,
    spend: &Spend,
    reclaim_after: Duration,
    zombie_after: Duration,
) -> Result<Savings, Error> {
    let ops_avoidable = report.config.gpu_cost.iter().any(|c| c.ops_avoidable);
    let Some(ledger) = &report.ledger else {
        return of_parts(&[], &[], &[], spend, (reclaim_after, zombie_after), ops_avoidable);
    };
    let threshold = report.config.zombie.starved_pcie_mib_per_s;
    let zombies: Vec<Zombie<'_>> = ledger
        .zombies
        .iter()
        .zip(&ledger.zombie_freed)
        .filter(|(row, _)| !is_starved(row, threshold))
        .map(|(row, freed)| Zombie { team: &row.team, gpu_uuid: &row.gpu_uuid, freed })
        .collect();
    of_parts(
        &ledger.reclaimed,
        &ledger.reclaimed_at,
        &zombies,
        spend,
        (reclaim_after, zombie_after),
        ops_avoidable,
    )
}

/// What ending one zombie would have freed, with its team and GPU.
#[derive(Debug, Clone, Copy)]
pub struct Zombie<'a> {
    pub team: &'a str,
    pub gpu_uuid: &'a str,
    pub freed: &'a ZombieFreed,
}

/// [`savings`] from what reclaiming would have freed per team (and per GPU
/// and hour of the week) and what ending each zombie would have; `rules`
/// are (reclaim after, end zombies after).
pub fn of_parts(
    reclaimed: &[Reclaimed],
    reclaimed_at: &[FreedAt],
    zombies: &[Zombie<'_>],
    spend: &Spend,
    rules: (Duration, Duration),
    ops_avoidable: bool,
) -> Result<Savings, Error> {
    let mut rows: Vec<SavingsLine> = Vec::new();
    for r in reclaimed {
        let l = line(&mut rows, &r.team, spend);
        l.reclaim_gpu_hours += r.gpu_hours;
        l.reclaim_cost += r.cost;
        l.freed_gpu_hours += r.gpu_hours;
        l.freed_cost += r.cost;
        l.cash_energy_cost += r.energy_cost;
        l.cash_ops_cost += r.ops_cost;
    }
    let mut freed_at: HashMap<String, Vec<f64>> = HashMap::new();
    for r in reclaimed_at {
        add_freed(&mut freed_at, &r.gpu_uuid, r.hour_of_week, r.cost);
    }
    for z in zombies {
        let f = z.freed;
        let l = line(&mut rows, z.team, spend);
        l.zombie_gpu_hours += f.freed.0;
        l.zombie_cost += f.freed.1;
        l.freed_gpu_hours += f.alone.0;
        l.freed_cost += f.alone.1;
        l.cash_energy_cost += f.alone_cash.0;
        l.cash_ops_cost += f.alone_cash.1;
        for &(h, cost) in &f.alone_at {
            add_freed(&mut freed_at, z.gpu_uuid, h, cost);
        }
    }
    for r in spend.rows.iter().filter(|r| r.idle_cost > 0.0) {
        line(&mut rows, &r.team, spend);
    }
    // Money to the cent, each column keeping its total.
    for column in [
        (|l: &mut SavingsLine| &mut l.reclaim_cost) as fn(&mut SavingsLine) -> &mut f64,
        |l| &mut l.zombie_cost,
        |l| &mut l.freed_cost,
        |l| &mut l.cash_energy_cost,
        |l| &mut l.cash_ops_cost,
    ] {
        let exact: Vec<f64> = rows.iter_mut().map(|l| *column(l)).collect();
        for (l, cents) in rows.iter_mut().zip(cents_keeping_total(&exact)?) {
            *column(l) = cents as f64 / 100.0;
        }
    }
    // What nobody held is `(unallocated)`'s; every other team's was held.
    for l in &mut rows {
        let (hours, cost) = (l.freed_gpu_hours, l.freed_cost);
        if l.team == UNALLOCATED {
            (l.freed_empty_gpu_hours, l.freed_empty_cost) = (hours, cost);
        } else {
            (l.freed_held_gpu_hours, l.freed_held_cost) = (hours, cost);
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
        freed_held_gpu_hours: sum(|l| l.freed_held_gpu_hours),
        freed_held_cost: cents(sum(|l| l.freed_held_cost)),
        freed_empty_gpu_hours: sum(|l| l.freed_empty_gpu_hours),
        freed_empty_cost: cents(sum(|l| l.freed_empty_cost)),
        cash_energy_cost: cents(sum(|l| l.cash_energy_cost)),
        cash_ops_cost: cents(sum(|l| l.cash_ops_cost)),
        idle_cost: spend.totals.idle_cost,
    };
    let (reclaim_after, zombie_after) = rules;
    Ok(Savings { reclaim_after, zombie_after, ops_avoidable, rows, total, freed_at })
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
            ("freed_held_gpu_hours", h(|l| l.freed_held_gpu_hours)),
            ("freed_held_cost", h(|l| l.freed_held_cost)),
            ("freed_empty_gpu_hours", h(|l| l.freed_empty_gpu_hours)),
            ("freed_empty_cost", h(|l| l.freed_empty_cost)),
            ("cash_energy_cost", h(|l| l.cash_energy_cost)),
            ("cash_ops_cost", h(|l| l.cash_ops_cost)),
            ("idle_cost", h(|l| l.idle_cost)),
            ("freed_pct_of_idle", columns::float(r.iter().map(|l| l.of_idle_pct().map(|p| round_to(p, 1))))),
        ])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::figures::spend::{SpendRow, Totals};

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

    /// vision: reclaiming frees 1 h ($10.004, $1.5 of it energy); its
    /// zombie 0.5 h ($5), of which 0.25 h ($2.503, $0.4 energy) reclaiming
    /// does not: 12.507 freed in all. nlp: a zombie alone, 0.1 h ($1.001).
    /// (unallocated): reclaiming frees 2 h of empty GPUs ($4). To the cent
    /// keeping each column's total: 10.00 / 0.00 / 4.00; 5.00 + 1.00 (6.00);
    /// freed 12.507 + 1.001 + 4 = 17.508 → 17.51: 12.51 + 1.00 + 4.00, of
    /// which 13.51 held and 4.00 already free.
    #[test]
    fn each_minute_is_freed_once_and_money_keeps_its_totals() {
        let reclaimed = [
            Reclaimed {
                team: "vision".into(),
                gpu_hours: 1.0,
                cost: 10.004,
                energy_cost: 1.5,
                ops_cost: 0.0,
            },
            Reclaimed {
                team: "(unallocated)".into(),
                gpu_hours: 2.0,
                cost: 4.0,
                energy_cost: 0.2,
                ops_cost: 0.0,
            },
        ];
        let reclaimed_at = [FreedAt { gpu_uuid: "GPU-a".into(), hour_of_week: 3, cost: 10.004 }];
        let vision = ZombieFreed {
            freed: (0.5, 5.0),
            alone: (0.25, 2.503),
            alone_cash: (0.4, 0.0),
            alone_at: vec![(3, 1.0), (4, 1.503)],
        };
        let nlp = ZombieFreed { freed: (0.1, 1.001), alone: (0.1, 1.001), ..ZombieFreed::default() };
        let zombies = [
            Zombie { team: "vision", gpu_uuid: "GPU-a", freed: &vision },
            Zombie { team: "nlp", gpu_uuid: "GPU-b", freed: &nlp },
        ];
        let spend = spend(&[("vision", 20.0), ("nlp", 2.0), ("(unallocated)", 8.0)]);
        let hour = Duration::from_secs(3600);
        let s =
            of_parts(&reclaimed, &reclaimed_at, &zombies, &spend, (hour, hour), false).expect("no overflow");
        let got: Vec<(&str, f64, f64, f64, f64)> = s
            .rows
            .iter()
            .map(|l| (l.team.as_str(), l.reclaim_cost, l.zombie_cost, l.freed_cost, l.freed_gpu_hours))
            .collect();
        assert_eq!(
            got,
            [
                ("vision", 10.0, 5.0, 12.51, 1.25),
                ("(unallocated)", 4.0, 0.0, 4.0, 2.0),
                ("nlp", 0.0, 1.0, 1.0, 0.1),
            ]
        );
        assert_eq!((s.total.freed_cost, s.total.idle_cost), (17.51, 30.0));
        assert_eq!((s.total.freed_held_cost, s.total.freed_empty_cost), (13.51, 4.0));
        assert_eq!((s.total.freed_held_gpu_hours, s.total.freed_empty_gpu_hours), (1.35, 2.0));
        assert_eq!((s.total.cash_energy_cost, s.total.cash_ops_cost), (2.1, 0.0));
        assert_eq!(s.rows[0].of_idle_pct(), Some(100.0 * 12.51 / 20.0));
        // GPU-a in hours 3 and 4: reclaiming's 10.004 and the zombie's own 2.503.
        assert!((s.freed_on(&["GPU-a", "GPU-c"], &[3, 4, 5]) - 12.507).abs() < 1e-9);
        assert!((s.freed_on(&["GPU-a"], &[4]) - 1.503).abs() < 1e-9);
        let lines = s.header_lines("USD");
        assert!(
            lines[1].contains("held by someone (reclaiming takes it back) 1.35 GPU-hours, $13.51"),
            "{lines:?}"
        );
        assert!(lines[1].contains("already free on empty GPUs"), "{lines:?}");
        assert!(lines[2].contains("$2.10 of energy; operating cost paid either way"), "{lines:?}");
    }
}
