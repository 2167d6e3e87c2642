//! The hour-of-week chart: mean utilization for each weekday (rows, Monday
//! first) and hour of the day (columns), UTC, as a heatmap. It shows when
//! the fleet is busy and when it sits idle: nights, weekends, lunch. The
//! recurring idle windows `apron windows` reports are outlined on it.

use std::path::Path;

use plotters::element::PathElement;
use plotters::style::Color;

use super::canvas::{self, Area, DrawError, DrawResult};
use super::context::ChartContext;
use super::error::ChartError;
use super::frame::{self, Frame};
use super::heatmap::{self, Cells, Grid};
use super::legend;
use super::name::ChartName;
use super::palette::WINDOW;
use super::series::{HourOfWeek, HourOfWeekCell, WeekWindow};

const DAYS: [&str; 7] = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"];

/// Hours in a week.
const WEEK_HOURS: usize = 7 * 24;

/// Draws the hour-of-week heatmap of `week` into the PNG `out`. Hours
/// without a cell, or with `None`, are hatched as "no samples"; a cell
/// whose `dow` or `hour` is out of range is ignored, and when two cells
/// name the same hour the later one wins. Each idle window's hours are
/// outlined.
pub fn hour_of_week(week: &HourOfWeek, ctx: &ChartContext, out: &Path) -> Result<(), ChartError> {
    canvas::write_png(ChartName::HourOfWeek, ctx, out, |root| draw(week, ctx, root))
}

/// Draws the chart on `root`; returns where the cells are, `None` when
/// there was nothing to plot.
pub(super) fn draw(
    week: &HourOfWeek,
    ctx: &ChartContext,
    root: &Area<'_>,
) -> Result<Option<Cells>, DrawError> {
    let mut entries = heatmap::legend();
    if !week.windows.is_empty() {
        entries.push(legend::Entry::new(
            format!(
                "Recurring idle window{} (apron windows)",
                if week.windows.len() == 1 { "" } else { "s" }
            ),
            legend::Swatch::Outline(WINDOW),
        ));
    }
    let frame = frame::draw(root, ChartName::HourOfWeek, ctx, &entries)?;
    if week.cells.is_empty() {
        frame::no_data(root, &frame)?;
        return Ok(None);
    }
    let cells = heatmap::draw(root, &frame, &grid(&week.cells))?;
    outline(root, &frame, &cells, &marked(&week.windows))?;
    Ok(Some(cells))
}

fn grid(cells: &[HourOfWeekCell]) -> Grid {
    let mut values = vec![None; WEEK_HOURS];
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
        scale_title: "Mean activity (%: utilization, else SM activity)".to_owned(),
        print_values: true,
        group_rows: false,
        label_every_row: true,
    }
}

/// Which hours of the week (Monday 00:00 first) some window covers.
fn marked(windows: &[WeekWindow]) -> Vec<bool> {
    let mut marked = vec![false; WEEK_HOURS];
    for run in windows.iter().flat_map(|w| &w.runs) {
        for h in run.start..run.start.saturating_add(run.hours.min(WEEK_HOURS as u32)) {
            marked[h as usize % WEEK_HOURS] = true;
        }
    }
    marked
}

/// Outlines the marked hours: a line along each side of a marked cell
/// whose neighbour on that side is not marked (or is off the grid), so a
/// window spanning days is one shape per block of cells.
fn outline(root: &Area<'_>, frame: &Frame, cells: &Cells, marked: &[bool]) -> DrawResult {
    let stroke = WINDOW.stroke_width(frame.px(4.0).max(2) as u32);
    let is = |row: i32, col: i32| {
        (0..7).contains(&row) && (0..24).contains(&col) && marked[(row * 24 + col) as usize]
    };
    for row in 0..7 {
        for col in 0..24 {
            if !is(row, col) {
                continue;
            }
            let r = cells.rect(row as usize, col as usize);
            // The cell's box including its share of the white gaps.
            let (left, top) = (r.left - 1, r.top - 1);
            let (right, bottom) = (cells.rect(row as usize, col as usize + 1).left - 1, {
                let below = cells.rect(row as usize + 1, col as usize).top;
                below - 1
            });
            let line = |a: (i32, i32), b: (i32, i32)| root.draw(&PathElement::new(vec![a, b], stroke));
            if !is(row - 1, col) {
                line((left, top), (right, top))?;
            }
            if !is(row + 1, col) {
                line((left, bottom), (right, bottom))?;
            }
            if !is(row, col - 1) {
                line((left, top), (left, bottom))?;
            }
            if !is(row, col + 1) {
                line((right, top), (right, bottom))?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chart::series::WeekRun;

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

    #[test]
    fn windows_mark_their_hours_and_wrap_past_sunday() {
        let window = |runs: Vec<WeekRun>| WeekWindow { label: String::new(), runs };
        let on = |windows: &[WeekWindow]| {
            let m = marked(windows);
            (0..WEEK_HOURS).filter(|h| m[*h]).collect::<Vec<usize>>()
        };
        let mon_tue = window(vec![WeekRun { start: 0, hours: 3 }, WeekRun { start: 24, hours: 3 }]);
        assert_eq!(on(&[mon_tue]), [0, 1, 2, 24, 25, 26]);
        // Sun 22:00 – Mon 02:00.
        let night = window(vec![WeekRun { start: 6 * 24 + 22, hours: 4 }]);
        assert_eq!(on(&[night]), [0, 1, 166, 167]);
        assert!(on(&[]).is_empty());
    }
}
