//! Actions: the steps worth most in the period, each with its figure and
//! the command that acts on it, as the monthly report leads with them:
//! reclaiming idle GPUs and ending zombies (what [`super::savings`] says
//! each alone would have freed), filling the costliest recurring idle
//! window ([`super::windows`]: the idle cost, in the period, of the GPUs its
//! cron lines use, in its hours), and bringing teams back within budget
//! ([`super::budgets`], the forecast's overrun). The three that free
//! capacity overlap (a GPU-minute reclaiming frees, ending its zombie frees
//! too), so they are also given together, each GPU-minute once
//! ([`Together`]). apron acts on none of them itself.

use apron_reports::money;

use super::budgets::Budgets;
use super::savings::Savings;
use super::windows::{Window, WindowWorth};
use crate::report::header::hours;

/// How many actions the report leads with.
pub const SHOWN: usize = 3;

/// What an action does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Reclaim idle GPUs.
    Reclaim,
    /// End zombie processes.
    Zombies,
    /// Run batch work in an idle window.
    Window,
    /// Bring a team back within its budget.
    Budget,
}

impl Kind {
    /// Whether it frees capacity (a budget's overrun is spend, not capacity).
    pub fn frees_capacity(self) -> bool {
        self != Kind::Budget
    }

    /// The action as a gerund: `reclaiming`.
    fn doing(self) -> &'static str {
        match self {
            Kind::Reclaim => "reclaiming",
            Kind::Zombies => "ending zombies",
            Kind::Window => "the idle window",
            Kind::Budget => "budgets",
        }
    }
}

/// One action.
#[derive(Debug, Clone, PartialEq)]
pub struct Action {
    /// What it does.
    pub kind: Kind,
    /// What to do, in words.
    pub what: String,
    /// What it alone is worth over the period shown (currency): capacity
    /// freed, valued at cost, or a budget's overrun.
    pub worth: f64,
    /// Why: the figure behind it, in words.
    pub because: String,
    /// The command (or page section) that acts on it.
    pub how: String,
}

/// The actions that free capacity (reclaiming, ending zombies, filling the
/// idle window) together, each GPU-minute once.
#[derive(Debug, Clone, PartialEq)]
pub struct Together {
    /// What they free together (currency), at most the idle cost.
    pub worth: f64,
    /// Which actions, and what was counted once, in words.
    pub because: String,
}

/// The period's actions: the ones shown, most first, and those that free
/// capacity together.
#[derive(Debug, Clone, PartialEq)]
pub struct Actions {
    /// At most [`SHOWN`], none worth nothing.
    pub shown: Vec<Action>,
    /// `None` when fewer than two actions free capacity.
    pub together: Option<Together>,
}

/// What the actions are found from.
#[derive(Debug, Clone, Copy)]
pub struct Findings<'a> {
    /// The period's month, `YYYY-MM`, for the commands.
    pub month: &'a str,
    /// What the rules would have freed.
    pub savings: &'a Savings,
    /// Zombie processes holding memory on an idle GPU now, and in the
    /// period at all (distinct processes).
    pub zombies_now: usize,
    pub zombies_in_period: usize,
    /// GPUs (and MIG instances) idle now past the reclaim rule.
    pub reclaimable_now: usize,
    /// The costliest recurring idle window and its worth, if any.
    pub window: Option<(&'a Window, &'a WindowWorth)>,
    pub budgets: Option<&'a Budgets>,
    pub currency: &'a str,
}

/// `1 process`, `2 processes`.
fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// The period's actions, most first, at most [`SHOWN`], none worth nothing;
/// and the ones that free capacity together.
pub fn actions(f: &Findings<'_>) -> Actions {
    let (month, currency, savings) = (f.month, f.currency, f.savings);
    let t = &savings.total;
    let cash = |x: f64| money(x, currency);
    let empty = savings.rows.iter().find(|l| l.team == "(unallocated)").map_or(0.0, |l| l.reclaim_cost);
    let mut freeing = vec![
        Action {
            kind: Kind::Reclaim,
            what: format!(
                "Reclaim GPUs idle for {} or more",
                humantime::format_duration(savings.reclaim_after)
            ),
            worth: t.reclaim_cost,
            because: format!(
                "{} GPU-hours idle past {}: held by someone (reclaiming takes it back) {}, on empty GPUs (already free, a scheduler's to use) {}; {} idle now",
                hours(t.reclaim_gpu_hours),
                humantime::format_duration(savings.reclaim_after),
                cash((t.reclaim_cost - empty).max(0.0)),
                cash(empty),
                count(f.reclaimable_now, "GPU is", "GPUs are"),
            ),
            how: format!("apron reclaim --month {month}"),
        },
        Action {
            kind: Kind::Zombies,
            what: format!(
                "End zombie processes after {} on an idle GPU",
                humantime::format_duration(savings.zombie_after)
            ),
            worth: t.zombie_cost,
            because: format!(
                "{} memory on an idle GPU now ({} in the period); ending each after that long would have freed {} GPU-hours held idle",
                count(f.zombies_now, "process holds", "processes hold"),
                f.zombies_in_period,
                hours(t.zombie_gpu_hours),
            ),
            how: format!("apron zombies --month {month} --commands"),
        },
    ];
    if let Some((w, worth)) = f.window {
        freeing.push(Action {
            kind: Kind::Window,
            what: format!("Run batch work in the idle window {}", w.label),
            worth: worth.idle_cost,
            because: format!(
                "the idle cost in the period of the {} its cron lines use, in its hours; {:.0}% of the fleet's GPU time in it was idle",
                count(worth.gpu_uuids.len(), "GPU", "GPUs"),
                w.idle_share_pct,
            ),
            how: format!("apron windows --month {month} --cron 'COMMAND'"),
        });
    }
    freeing.retain(|a| a.worth >= 0.005);
    let together = (freeing.len() >= 2).then(|| {
        let window = f.window.map_or(0.0, |(_, w)| {
            let gpus: Vec<&str> = w.gpu_uuids.iter().map(String::as_str).collect();
            (w.idle_cost - savings.freed_on(&gpus, &w.hours)).max(0.0)
        });
        let names: Vec<&str> = freeing.iter().map(|a| a.kind.doing()).collect();
        Together {
            worth: (t.freed_cost + window).min(t.idle_cost.max(t.freed_cost)),
            because: format!(
                "{} together, each GPU-minute counted once (a minute freed by two of them is not counted twice), of the {} idle cost",
                names.join(", "),
                cash(t.idle_cost)
            ),
        }
    });
    let mut all = freeing;
    for r in f.budgets.into_iter().flat_map(|b| b.rows.iter()) {
        let over = r.forecast - r.budget;
        if over > 0.0 {
            all.push(Action {
                kind: Kind::Budget,
                what: format!("Bring {} back within its budget", r.team),
                worth: over,
                because: format!(
                    "{} of {} spent, {} by the month's end",
                    cash(r.spent),
                    cash(r.budget),
                    cash(r.forecast)
                ),
                how: format!("apron spend --month {month}; apron idle-cost --by user --month {month}"),
            });
        }
    }
    all.retain(|a| a.worth >= 0.005);
    all.sort_by(|a, b| b.worth.total_cmp(&a.worth));
    all.truncate(SHOWN);
    Actions { shown: all, together }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::time::Duration;

    use super::*;
    use crate::report::figures::budgets::BudgetRow;
    use crate::report::figures::savings::SavingsLine;
    use crate::report::period::Period;

    /// Reclaiming frees `reclaim`, ending zombies `zombie`; together
    /// `freed`; of it 40 on GPU-a in hour 0 of the week. Idle cost 1000.
    fn savings(reclaim: f64, zombie: f64, freed: f64) -> Savings {
        let total = SavingsLine {
            team: "(total)".into(),
            reclaim_gpu_hours: 10.0,
            reclaim_cost: reclaim,
            zombie_gpu_hours: 2.0,
            zombie_cost: zombie,
            freed_gpu_hours: 11.0,
            freed_cost: freed,
            idle_cost: 1000.0,
            ..SavingsLine::default()
        };
        Savings {
            reclaim_after: Duration::from_secs(7200),
            zombie_after: Duration::from_secs(600),
            ops_avoidable: false,
            rows: Vec::new(),
            total,
            freed_at: {
                let mut freed_at = HashMap::new();
                crate::report::figures::savings::add_freed(&mut freed_at, "GPU-a", 0, 40.0);
                freed_at
            },
        }
    }

    fn window() -> Window {
        Window {
            label: "Mon–Fri 00:00–06:00".into(),
            hours_per_week: 30,
            idle_share_pct: 80.0,
            idle_gpu_hours_per_week: 100.0,
            idle_cost_per_week: 70.0,
        }
    }

    /// The window's GPUs' idle cost in its hours over the period: `cost`.
    fn worth(cost: f64) -> WindowWorth {
        WindowWorth { idle_cost: cost, gpu_uuids: vec!["GPU-a".into(), "GPU-b".into()], hours: vec![0, 1] }
    }

    fn budgets(spent: f64, forecast: f64, budget: f64) -> Budgets {
        Budgets {
            month: Period { start_ms: 0, end_ms: 1 },
            data_end_ms: 0,
            over: false,
            rows: vec![BudgetRow {
                team: "nlp".into(),
                budget,
                spent,
                forecast,
                exceeded_at: None,
                forecast_exceeded_at: None,
            }],
        }
    }

    fn findings<'a>(
        savings: &'a Savings,
        window: Option<(&'a Window, &'a WindowWorth)>,
        budgets: Option<&'a Budgets>,
    ) -> Findings<'a> {
        Findings {
            month: "2026-11",
            savings,
            zombies_now: 1,
            zombies_in_period: 4,
            reclaimable_now: 3,
            window,
            budgets,
            currency: "USD",
        }
    }

    #[test]
    fn the_three_worth_most_lead_each_with_its_command() {
        // Window 300 in the period; nlp 600 over; reclaim 500; zombies 20.
        let b = budgets(4000.0, 5600.0, 5000.0);
        let (s, w, ww) = (savings(500.0, 20.0, 510.0), window(), worth(300.0));
        let got = actions(&findings(&s, Some((&w, &ww)), Some(&b)));
        let worth: Vec<f64> = got.shown.iter().map(|a| a.worth).collect();
        assert_eq!(worth, [600.0, 500.0, 300.0]);
        assert_eq!(got.shown[0].what, "Bring nlp back within its budget");
        assert_eq!(got.shown[0].because, "$4,000.00 of $5,000.00 spent, $5,600.00 by the month's end");
        assert_eq!(got.shown[1].how, "apron reclaim --month 2026-11");
        assert_eq!(got.shown[2].how, "apron windows --month 2026-11 --cron 'COMMAND'");
        // Together: reclaiming and zombies 510, the window 300 less the 40
        // of it they free already: 770, not 820 (nor 1420 with the budget).
        let together = got.together.expect("three actions free capacity");
        assert_eq!(together.worth, 770.0);
        assert!(together.because.starts_with("reclaiming, ending zombies, the idle window together"));
    }

    #[test]
    fn nothing_worth_nothing_is_an_action_and_one_is_not_together() {
        let b = budgets(100.0, 200.0, 5000.0);
        let s = savings(0.0, 12.5, 12.5);
        let got = actions(&findings(&s, None, Some(&b)));
        assert_eq!(got.shown.len(), 1);
        assert_eq!(got.shown[0].how, "apron zombies --month 2026-11 --commands");
        assert_eq!(
            got.shown[0].because,
            "1 process holds memory on an idle GPU now (4 in the period); ending each after that long would have freed 2.00 GPU-hours held idle"
        );
        assert_eq!(got.together, None);
    }

    #[test]
    fn the_because_reads_as_words_and_money() {
        let s = savings(9223.5, 20.0, 9230.0);
        let got = actions(&findings(&s, None, None));
        let because = &got.shown[0].because;
        assert_eq!(
            because,
            "10.0 GPU-hours idle past 2h: held by someone (reclaiming takes it back) $9,223.50, on empty GPUs (already free, a scheduler's to use) $0.00; 3 GPUs are idle now"
        );
        assert!(!because.contains('_'), "no column names: {because}");
    }
}
