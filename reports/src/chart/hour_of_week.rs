//! The hour-of-week chart: mean utilization for each weekday (rows, Monday
//! first) and hour of the day (columns), UTC, as a heatmap. It shows when
//! the fleet is busy and when it sits idle: nights, weekends, lunch.

use std::path::Path;

use super::canvas::{self, Area, DrawError};
use super::context::ChartContext;
use super::error::ChartError;
use super::frame;
use super::heatmap::{self, Cells, Grid};
use super::name::ChartName;
use super::series::HourOfWeekCell;

const DAYS: [&str; 7] = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"];

/// Draws the hour-of-week heatmap of `cells` into the PNG `out`. Hours
/// without a cell, or with `None`, are hatched as "no samples"; a cell
/// whose `dow` or `hour` is out of range is ignored, and when two cells
/// name the same hour the later one wins.
pub fn hour_of_week(cells: &[HourOfWeekCell], ctx: &ChartContext, out: &Path) -> Result<(), ChartError> {
    canvas::write_png(ChartName::HourOfWeek, ctx, out, |root| draw(cells, ctx, root))
}

/// Draws the chart on `root`; returns where the cells are, `None` when
/// there was nothing to plot.
pub(super) fn draw(
    cells: &[HourOfWeekCell],
    ctx: &ChartContext,
    root: &Area<'_>,
) -> Result<Option<Cells>, DrawError> {
    let frame = frame::draw(root, ChartName::HourOfWeek, ctx, &heatmap::legend())?;
    if cells.is_empty() {
        frame::no_data(root, &frame)?;
        return Ok(None);
    }
    heatmap::draw(root, &frame, &grid(cells)).map(Some)
}

fn grid(cells: &[HourOfWeekCell]) -> Grid {
    let mut values = vec![None; 7 * 24];
    for cell in cells {
        if cell.dow < 7 && cell.hour < 24 {
            values[cell.dow as usize * 24 + cell.hour as usize] =
                cell.mean_util_pct.filter(|v| v.is_finite());
        }
    }
    Grid {
        rows: DAYS.iter().map(|d| (*d).to_owned()).collect(),
        columns: (0..24).map(|h| format!("{h:02}")).collect(),
        values,
        x_title: "Hour of day (UTC)".to_owned(),
        y_title: "Day of week (UTC)".to_owned(),
        print_values: true,
        group_rows: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cells_land_by_day_and_hour_and_strays_are_ignored() {
        let cell = |dow, hour, v| HourOfWeekCell { dow, hour, mean_util_pct: v };
        let g = grid(&[
            cell(0, 9, Some(100.0)),
            cell(6, 23, Some(5.0)),
            cell(7, 0, Some(1.0)),
            cell(0, 24, Some(1.0)),
        ]);
        assert_eq!(g.values.len(), 168);
        assert_eq!(g.values[9], Some(100.0));
        assert_eq!(g.values[6 * 24 + 23], Some(5.0));
        assert_eq!(g.values.iter().flatten().count(), 2);
        assert_eq!(g.rows[0], "Mon");
        assert_eq!(g.columns[9], "09");
    }
}
