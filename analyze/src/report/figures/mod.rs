//! Every figure apron states, computed in one place each and returned as
//! typed rows: one module per report or chart series. Money is computed
//! here and nowhere else (to the cent, keeping totals:
//! [`crate::report::rounding`]); so are the header lines that state a figure.
//!
//! A figure runs its `queries/<name>.sql` through the [`ReportContext`]'s session
//! and reads the result into rows ([`crate::report::columns::Columns`]); its rows
//! print through [`crate::output::write_rows`] (the [`crate::output::Rows`]
//! impl says which columns, in what order, rounded how). The commands
//! (`crate::commands`) parse, call a figure and print it; the charts
//! ([`crate::report::charts`]) and the monthly report draw the same rows.
//!
//! - [`spend`]: cost per team, busy and idle, and the fleet totals;
//! - [`idle_cost`]: idle cost by team, user, host or GPU;
//! - [`windows`]: the hour-of-week profile and the recurring idle windows;
//! - [`zombies`]: processes holding memory on idle GPUs, with their team;
//! - [`starved`]: processes on idle GPUs that move data over PCIe: starved
//!   of input, not zombies;
//! - [`reclaim`]: GPUs idle for a long stretch;
//! - [`alerts`]: the alert rules firing now;
//! - [`events`]: the GPUs' faults, what each calls for, which GPUs to drain;
//! - [`jobs`]: every job's GPU time, cost, efficiency and findings;
//! - [`notices`]: a letter to each user whose jobs left GPUs idle;
//! - [`budgets`]: each team's month against its budget, and its forecast;
//! - [`savings`]: what reclaiming idle GPUs and ending zombies would free;
//! - [`actions`]: the month's steps worth most money, as the report leads;
//! - [`fleet_state`], [`power`], [`gpu_days`]: the time and GPU series
//!   only the charts draw.

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::error::ArrowError;
use datafusion::common::ScalarValue;

use crate::error::{Error, SessionError};
pub use crate::report::context::ReportContext;
use crate::session::Session;

pub mod actions;
pub mod alerts;
pub mod budgets;
pub mod events;
pub mod fleet_state;
pub mod gpu_days;
pub mod idle_cost;
pub mod jobs;
pub mod notices;
pub mod power;
pub mod reclaim;
pub mod savings;
pub mod spend;
pub mod starved;
pub mod windows;
pub mod zombies;

/// Runs `sql` with `params` over `session` and returns every row in one
/// batch.
async fn query(session: &Session, sql: &str, params: Vec<ScalarValue>) -> Result<RecordBatch, Error> {
    let df = session.sql_with_params(sql, params).await?;
    session.collect_batch(df).await
}

/// A query result that does not read as a figure's rows (a column missing,
/// of the wrong type, or null where it may not be): the query failed.
fn unreadable(source: ArrowError) -> Error {
    SessionError::Execute { source: source.into() }.into()
}

#[cfg(test)]
mod tests {
    /// The code of `analyze/src/<path>`: its lines that are not comments,
    /// up to its tests.
    fn source(path: &str) -> String {
        let file = format!("{}/src/{path}", env!("CARGO_MANIFEST_DIR"));
        let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("read {file}: {e}"));
        let code = text.split("#[cfg(test)]").next().unwrap_or_default();
        code.lines().filter(|l| !l.trim_start().starts_with("//")).collect::<Vec<_>>().join("\n")
    }

    #[test]
    fn dependencies_point_from_commands_to_figures_never_back() {
        let figures = [
            "actions",
            "alerts",
            "budgets",
            "fleet_state",
            "gpu_days",
            "idle_cost",
            "mod",
            "power",
            "reclaim",
            "savings",
            "spend",
            "starved",
            "windows",
            "zombies",
        ];
        for name in figures {
            let text = source(&format!("report/figures/{name}.rs"));
            assert!(!text.contains("crate::commands"), "report/figures/{name}.rs imports a command");
        }
        assert!(
            !source("report/charts.rs").contains("crate::commands"),
            "report/charts.rs imports a command"
        );
        assert!(!source("report/context.rs").contains("crate::commands"));
    }

    #[test]
    fn commands_of_figures_parse_call_and_print() {
        // No SQL, no reading of a result, no rounding: those are the figures'.
        for name in
            ["alerts", "chart", "idle_cost", "reclaim", "report", "spend", "starved", "windows", "zombies"]
        {
            let text = source(&format!("commands/{name}.rs"));
            for computing in
                ["queries::", "sql_with_params", "Columns", "rounding::", " team_of(", "f64_column"]
            {
                assert!(!text.contains(computing), "commands/{name}.rs uses {computing}");
            }
        }
    }
}
