//! Actions: the steps worth most money in a month, each with its figure and
//! the command that acts on it, as the monthly report leads with them:
//! reclaiming idle GPUs and ending zombies (what [`super::savings`] says
//! they would have freed), filling the costliest recurring idle window
//! ([`super::windows`], its weekly idle cost over the month), and bringing
//! teams back within budget ([`super::budgets`], the forecast's overrun).
//! apron acts on none of them itself.

use apron_reports::money;

use super::budgets::Budgets;
use super::savings::Savings;
use super::windows::Window;

/// How many actions the report leads with.
pub const SHOWN: usize = 3;

/// One action.
#[derive(Debug, Clone, PartialEq)]
pub struct Action {
    /// What to do, in words.
    pub what: String,
    /// What it is worth in the month (currency).
    pub worth: f64,
    /// Why: the figure behind it, in words.
    pub because: String,
    /// The command (or page section) that acts on it.
    pub how: String,
}

/// The month's actions, most money first, at most [`SHOWN`], none worth
/// nothing. `month` is `YYYY-MM`; `days` its length; `window` the
/// costliest recurring idle window, if any.
pub fn actions(
    month: &str,
    days: f64,
    savings: &Savings,
    zombie_processes: usize,
    window: Option<&Window>,
    budgets: Option<&Budgets>,
    currency: &str,
) -> Vec<Action> {
    let t = &savings.total;
    let mut all = vec![
        Action {
            what: format!(
                "Reclaim GPUs idle for {} or more",
                humantime::format_duration(savings.reclaim_after)
            ),
            worth: t.reclaim_cost,
            because: format!(
                "{:.1} GPU-hours would have been freed after that long idle; still_idle marks those to take back now",
                t.reclaim_gpu_hours
            ),
            how: format!("apron reclaim --month {month}"),
        },
        Action {
            what: format!(
                "End zombie processes after {} on an idle GPU",
                humantime::format_duration(savings.zombie_after)
            ),
            worth: t.zombie_cost,
            because: format!(
                "{zombie_processes} processes held memory on idle GPUs; {:.1} GPU-hours after that long",
                t.zombie_gpu_hours
            ),
            how: format!("apron zombies --month {month} --commands"),
        },
    ];
    if let Some(w) = window {
        all.push(Action {
            what: format!("Run batch work in the idle window {}", w.label),
            worth: w.idle_cost_per_week * days / 7.0,
            because: format!(
                "{:.0}% of its GPU time idle, {} a week",
                w.idle_share_pct,
                money(w.idle_cost_per_week, currency)
            ),
            how: format!("apron windows --month {month} --cron 'COMMAND'"),
        });
    }
    for r in budgets.into_iter().flat_map(|b| b.rows.iter()) {
        let over = r.forecast - r.budget;
        if over > 0.0 {
            all.push(Action {
                what: format!("Bring {} back within its budget", r.team),
                worth: over,
                because: format!(
                    "{} of {} spent, {} by the month's end",
                    money(r.spent, currency),
                    money(r.budget, currency),
                    money(r.forecast, currency)
                ),
                how: format!("apron spend --month {month}; apron idle-cost --by user --month {month}"),
            });
        }
    }
    all.retain(|a| a.worth >= 0.005);
    all.sort_by(|a, b| b.worth.total_cmp(&a.worth));
    all.truncate(SHOWN);
    all
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::figures::budgets::BudgetRow;
    use crate::figures::savings::SavingsLine;
    use crate::period::Period;

    fn savings(reclaim: f64, zombie: f64) -> Savings {
        let total = SavingsLine {
            team: "(total)".into(),
            reclaim_gpu_hours: 10.0,
            reclaim_cost: reclaim,
            zombie_gpu_hours: 2.0,
            zombie_cost: zombie,
            freed_gpu_hours: 11.0,
            freed_cost: reclaim.max(zombie),
            idle_cost: 1000.0,
        };
        Savings {
            reclaim_after: Duration::from_secs(7200),
            zombie_after: Duration::from_secs(600),
            rows: Vec::new(),
            total,
        }
    }

    fn window(per_week: f64) -> Window {
        Window {
            label: "Mon–Fri 00:00–06:00".into(),
            hours_per_week: 30,
            idle_share_pct: 80.0,
            idle_gpu_hours_per_week: 100.0,
            idle_cost_per_week: per_week,
        }
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

    #[test]
    fn the_three_worth_most_lead_each_with_its_command() {
        // Window: 70 a week over 30 days is 300; nlp 600 over; reclaim 500; zombies 20.
        let b = budgets(4000.0, 5600.0, 5000.0);
        let got = actions("2026-11", 30.0, &savings(500.0, 20.0), 4, Some(&window(70.0)), Some(&b), "USD");
        let worth: Vec<f64> = got.iter().map(|a| a.worth).collect();
        assert_eq!(worth, [600.0, 500.0, 300.0]);
        assert_eq!(got[0].what, "Bring nlp back within its budget");
        assert_eq!(got[0].because, "$4,000.00 of $5,000.00 spent, $5,600.00 by the month's end");
        assert_eq!(got[1].how, "apron reclaim --month 2026-11");
        assert_eq!(got[2].how, "apron windows --month 2026-11 --cron 'COMMAND'");
    }

    #[test]
    fn nothing_worth_nothing_is_an_action() {
        let b = budgets(100.0, 200.0, 5000.0);
        let got = actions("2026-11", 30.0, &savings(0.0, 12.5), 1, None, Some(&b), "USD");
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].how, "apron zombies --month 2026-11 --commands");
    }
}
