//! Renders all six charts and a sample report bundle from realistic fake
//! data, for looking at: 64 GPUs on 8 hosts over 30 days of November 2026,
//! six teams with costs in the tens of thousands of USD.
//!
//! ```text
//! cargo run -p apron-reports --example sample_charts -- /tmp/apron-sample
//! ```

use std::error::Error;
use std::f64::consts::TAU;
use std::path::PathBuf;

use apron_reports::{
    ChartContext, ChartName, Figure, FleetStatePoint, GpuDayCell, HourOfWeek, HourOfWeekCell, PowerPoint,
    Report, Section, TableData, TeamCost, WeekRun, WeekWindow, money,
};
use chrono::{Datelike, NaiveDate};

const HOUR_MS: i64 = 3_600_000;
/// 2026-11-01 00:00 UTC.
const START_MS: i64 = 1_793_491_200_000;
const GPUS: usize = 64;
const DAYS: i64 = 30;

fn main() -> Result<(), Box<dyn Error>> {
    let out = PathBuf::from(std::env::args().nth(1).unwrap_or_else(|| "/tmp/apron-sample".to_owned()));
    std::fs::create_dir_all(&out)?;
    let ctx = ChartContext::new("2026-11-01 00:00 – 2026-12-01 00:00 UTC", "/var/lib/apron/data", "USD");

    let hours: Vec<Hour> = (0..DAYS * 24).map(hour).collect();
    let fleet: Vec<FleetStatePoint> = hours
        .iter()
        .map(|h| FleetStatePoint {
            t_ms: h.t_ms,
            busy: h.busy,
            idle_held: h.held,
            idle_empty: h.empty,
            unknown: 0.0,
        })
        .collect();
    apron_reports::fleet_state(&fleet, &ctx, &out.join(ChartName::FleetState.file_name()))?;

    let teams = teams();
    apron_reports::idle_cost(&teams, &ctx, &out.join(ChartName::IdleCost.file_name()))?;
    apron_reports::team_spend(&teams, &ctx, &out.join(ChartName::TeamSpend.file_name()))?;

    let mut week = Vec::new();
    for dow in 0..7u32 {
        for hour in 0..24u32 {
            let samples: Vec<f64> =
                hours.iter().filter(|h| h.dow == dow && h.hour == hour).map(|h| h.util).collect();
            let mean_util_pct =
                (!samples.is_empty()).then(|| samples.iter().sum::<f64>() / samples.len() as f64);
            week.push(HourOfWeekCell { dow, hour, mean_util_pct });
        }
    }
    // Weeknights 00:00–06:00 and the weekend, as `apron windows` would find them.
    let weeknights = (0..5).map(|d| WeekRun { start: d * 24, hours: 6 }).collect();
    let windows = vec![
        WeekWindow { label: "Mon–Fri 00:00–06:00".into(), runs: weeknights },
        WeekWindow {
            label: "Sat 00:00 – Mon 00:00".into(),
            runs: vec![WeekRun { start: 5 * 24, hours: 48 }],
        },
    ];
    let week = HourOfWeek { cells: week, windows };
    apron_reports::hour_of_week(&week, &ctx, &out.join(ChartName::HourOfWeek.file_name()))?;

    apron_reports::gpu_days(&gpu_days(), &ctx, &out.join(ChartName::GpuDays.file_name()))?;

    let mut energy = 0.0;
    let power: Vec<PowerPoint> = hours
        .iter()
        .map(|h| {
            let power_kw = 64.0 * 0.09 + h.busy * 0.55 + h.held * 0.12;
            energy += power_kw;
            PowerPoint { t_ms: h.t_ms, power_kw, energy_kwh: energy }
        })
        .collect();
    apron_reports::power(&power, &ctx, &out.join(ChartName::Power.file_name()))?;

    let files =
        apron_reports::write_bundle(&report(&ctx, &teams, energy), &out, apron_reports::Assets::Linked)?;
    for path in files.paths() {
        println!("{}", path.display());
    }
    for chart in ChartName::ALL {
        println!("{}", out.join(chart.file_name()).display());
    }
    Ok(())
}

/// One hour of the fake fleet.
struct Hour {
    t_ms: i64,
    dow: u32,
    hour: u32,
    busy: f64,
    held: f64,
    empty: f64,
    util: f64,
}

/// Busy in office hours, quieter at night and at weekends, a deadline push
/// in the third week, and a cheap deterministic wobble.
fn hour(i: i64) -> Hour {
    let t_ms = START_MS + i * HOUR_MS;
    let day = i / 24;
    let hour = (i % 24) as u32;
    // 2026-11-01 is a Sunday.
    let dow = ((day + 6) % 7) as u32;
    let weekend = dow >= 5;
    let office = (f64::from(hour) - 5.0) / 24.0 * TAU;
    let daily = 0.5 - 0.5 * office.cos();
    let push = if (14..21).contains(&day) { 8.0 } else { 0.0 };
    let wobble = 2.5 * ((i as f64) * 0.37).sin() + 1.5 * ((i as f64) * 0.11).cos();
    let busy = if weekend { 14.0 + 6.0 * daily } else { 18.0 + 26.0 * daily } + push + wobble;
    let held = if weekend { 12.0 } else { 9.0 + 5.0 * (1.0 - daily) } + 0.8 * wobble.abs();
    let busy = busy.clamp(0.0, GPUS as f64);
    let held = held.clamp(0.0, GPUS as f64 - busy);
    let empty = GPUS as f64 - busy - held;
    let util = (busy * 92.0 + held * 3.0) / GPUS as f64;
    Hour { t_ms, dow, hour, busy, held, empty, util }
}

fn teams() -> Vec<TeamCost> {
    [
        ("vision", 48_200.0, 6_300.0),
        ("llm-pretrain", 61_900.0, 3_100.0),
        ("speech", 17_400.0, 9_800.0),
        ("recsys", 22_800.0, 4_200.0),
        ("research-sandbox", 6_100.0, 12_700.0),
        ("platform", 3_900.0, 1_240.5),
    ]
    .into_iter()
    .map(|(team, busy_cost, idle_cost)| TeamCost { team: team.to_owned(), busy_cost, idle_cost })
    .collect()
}

fn gpu_days() -> Vec<GpuDayCell> {
    let first = NaiveDate::from_ymd_opt(2026, 11, 1).expect("a valid date");
    let mut cells = Vec::new();
    for (d, day) in first.iter_days().take(DAYS as usize).enumerate() {
        for gpu in 0..GPUS {
            let (node, index) = (gpu / 8 + 1, gpu % 8);
            let weekend = day.weekday().number_from_monday() >= 6;
            let seed = (gpu as f64) * 1.7 + (d as f64) * 0.9;
            let base = match node {
                // A host reserved by a team that rarely uses it.
                3 => 4.0 + 3.0 * seed.sin().abs(),
                // A host that was down for maintenance for four days.
                6 if (17..21).contains(&d) => -1.0,
                _ => 55.0 + 30.0 * seed.sin() * (seed * 0.3).cos(),
            };
            let busy_share_pct = match base {
                b if b < 0.0 => None,
                b if weekend => Some((b * 0.45).clamp(0.0, 100.0)),
                b => Some(b.clamp(0.0, 100.0)),
            };
            cells.push(GpuDayCell { gpu: format!("node{node:02}/{index}"), day, busy_share_pct });
        }
    }
    cells
}

fn report(ctx: &ChartContext, teams: &[TeamCost], energy_kwh: f64) -> Report {
    let idle: f64 = teams.iter().map(|t| t.idle_cost).sum();
    let busy: f64 = teams.iter().map(|t| t.busy_cost).sum();
    let spend_rows = teams
        .iter()
        .map(|t| {
            let total = t.busy_cost + t.idle_cost;
            vec![
                t.team.clone(),
                format!("{:.2}", t.busy_cost),
                format!("{:.2}", t.idle_cost),
                format!("{total:.2}"),
            ]
        })
        .collect();
    Report {
        title: "GPU fleet report: November 2026".to_owned(),
        period: ctx.period.clone(),
        data: ctx.data.clone(),
        config: "/etc/apron/apron.toml".to_owned(),
        currency: ctx.currency.clone(),
        headline: vec![
            Figure {
                label: "GPU spend".to_owned(),
                value: money(busy + idle, &ctx.currency),
                change: Some("+8% vs October".to_owned()),
            },
            Figure {
                label: "Idle cost".to_owned(),
                value: money(idle, &ctx.currency),
                change: Some("+12% vs October".to_owned()),
            },
            Figure { label: "Mean utilization".to_owned(), value: "41%".to_owned(), change: None },
            Figure {
                label: "Energy".to_owned(),
                value: format!("{} kWh", apron_reports::grouped(energy_kwh, 0)),
                change: Some("-3% vs October".to_owned()),
            },
        ],
        sections: vec![
            Section {
                heading: "Fleet state".to_owned(),
                paragraphs: vec![
                    "On average 41% of the 64 GPUs were busy. Idle GPUs with memory held peak at night and \
                     at weekends: jobs & notebooks that keep their allocation <while idle>."
                        .to_owned(),
                ],
                table: None,
                chart: Some(ChartName::FleetState),
            },
            Section {
                heading: "Spend by team".to_owned(),
                paragraphs: vec!["Research-sandbox spent more on idle GPUs than on busy ones.".to_owned()],
                table: Some(TableData {
                    name: "spend".to_owned(),
                    columns: ["team", "busy_cost", "idle_cost", "cost"].map(str::to_owned).to_vec(),
                    rows: spend_rows,
                    shown: None,
                    numbers: Vec::new(),
                    rest: Default::default(),
                }),
                chart: Some(ChartName::TeamSpend),
            },
            Section {
                heading: "Idle cost".to_owned(),
                paragraphs: vec![
                    "Idle cost is GPU time held but unused, priced at the team's rate.".to_owned(),
                ],
                table: None,
                chart: Some(ChartName::IdleCost),
            },
            Section {
                heading: "When the fleet works".to_owned(),
                paragraphs: vec!["Utilization by hour of the week, UTC.".to_owned()],
                table: None,
                chart: Some(ChartName::HourOfWeek),
            },
            Section {
                heading: "Every GPU, every day".to_owned(),
                paragraphs: vec!["node03 sat nearly idle all month; node06 was down Nov 18–21.".to_owned()],
                table: Some(TableData {
                    name: "idle-hosts".to_owned(),
                    columns: ["host", "idle_gpu_hours", "because"].map(str::to_owned).to_vec(),
                    rows: vec![
                        vec![
                            "node03".to_owned(),
                            "5120.5".to_owned(),
                            "reserved, \"rarely used\", by speech".to_owned(),
                        ],
                        vec![
                            "node06".to_owned(),
                            "768".to_owned(),
                            "down for maintenance, 4 days".to_owned(),
                        ],
                    ],
                    shown: None,
                    numbers: Vec::new(),
                    rest: Default::default(),
                }),
                chart: Some(ChartName::GpuDays),
            },
            Section {
                heading: "Power".to_owned(),
                paragraphs: vec![format!("The fleet used {} kWh.", apron_reports::grouped(energy_kwh, 0))],
                table: None,
                chart: Some(ChartName::Power),
            },
        ],
    }
}
