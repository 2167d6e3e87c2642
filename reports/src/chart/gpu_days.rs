//! The GPU-days chart: every physical GPU a row (a MIG GPU's instances in
//! its row), every day of the period a column, coloured by the share of
//! that GPU's time that was busy that day. It shows which GPUs sit idle for
//! days on end, and hosts that went dark. Every row is labelled: with more
//! GPUs than the canvas has room to label, it grows taller.

use std::collections::HashMap;
use std::path::Path;

use chrono::NaiveDate;

use super::canvas::{self, Area, DrawError};
use super::context::ChartContext;
use super::error::ChartError;
use super::frame;
use super::heatmap::{self, Cells, Grid};
use super::legend;
use super::name::ChartName;
use super::series::GpuDayCell;

/// Draws the GPU-days heatmap of `cells` into the PNG `out`. Rows are GPUs
/// in order of first appearance in `cells`; columns are every day from the
/// earliest to the latest day in `cells`, so a day nobody recorded shows as
/// a hatched column. When two cells name the same GPU and day the later
/// one wins.
pub fn gpu_days(cells: &[GpuDayCell], ctx: &ChartContext, out: &Path) -> Result<(), ChartError> {
    let rows = grid(cells).map_or(0, |g| g.rows.len());
    let ctx = &ctx.clone().with_size(ctx.width, labelled_height(ctx.width, ctx.height, rows));
    canvas::write_png(ChartName::GpuDays, ctx, out, |root| draw(cells, ctx, root))
}

/// Pixels a row needs (at 1600x900) for a label of the smallest readable size.
const ROW_PX: f64 = 14.0;

/// Pixels of the canvas (at 1600x900) that are not grid: title, legend,
/// day labels, footer.
const FRAME_PX: f64 = 330.0;

/// The canvas height that labels each of `rows` rows on a `width` wide
/// canvas asked to be `height` tall: `height`, or taller (up to the
/// largest canvas) when the rows would be too thin to label.
fn labelled_height(width: u32, height: u32, rows: usize) -> u32 {
    let s = (f64::from(width) / 1600.0).min(f64::from(height) / 900.0);
    let needed = ((rows as f64 * ROW_PX + FRAME_PX) * s).ceil();
    height.max(needed.min(f64::from(ChartContext::MAX_SIDE)) as u32)
}

/// Draws the chart on `root`; returns where the cells are, `None` when
/// there was nothing to plot.
pub(super) fn draw(
    cells: &[GpuDayCell],
    ctx: &ChartContext,
    root: &Area<'_>,
) -> Result<Option<Cells>, DrawError> {
    let mut legend = vec![legend::Entry::new(
        "Busy share of GPU time (MIG: each instance by its share of the GPU)",
        legend::Swatch::Scale,
    )];
    legend.extend(heatmap::legend());
    let frame = frame::draw(root, ChartName::GpuDays, ctx, &legend)?;
    match grid(cells) {
        Some(grid) => heatmap::draw(root, &frame, &grid).map(Some),
        None => {
            frame::no_data(root, &frame)?;
            Ok(None)
        }
    }
}

/// The grid of `cells`, `None` when there are none.
fn grid(cells: &[GpuDayCell]) -> Option<Grid> {
    let first = cells.iter().map(|c| c.day).min()?;
    let last = cells.iter().map(|c| c.day).max()?;
    let days: Vec<NaiveDate> = first.iter_days().take_while(|d| *d <= last).collect();

    let mut rows: Vec<String> = Vec::new();
    let mut row_of: HashMap<&str, usize> = HashMap::new();
    for cell in cells {
        if !row_of.contains_key(cell.gpu.as_str()) {
            row_of.insert(&cell.gpu, rows.len());
            rows.push(cell.gpu.clone());
        }
    }
    let mut values = vec![None; rows.len() * days.len()];
    for cell in cells {
        let col = (cell.day - first).num_days() as usize;
        values[row_of[cell.gpu.as_str()] * days.len() + col] = cell.busy_share_pct.filter(|v| v.is_finite());
    }
    Some(Grid {
        columns: days.iter().map(|d| d.format("%b %d").to_string()).collect(),
        rows,
        values,
        x_title: "Day (UTC)".to_owned(),
        y_title: "GPU (host, index)".to_owned(),
        scale_title: "Busy share of GPU time (%)".to_owned(),
        print_values: false,
        group_rows: true,
        label_every_row: true,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(gpu: &str, day: u32, v: Option<f64>) -> GpuDayCell {
        GpuDayCell {
            gpu: gpu.to_owned(),
            day: NaiveDate::from_ymd_opt(2026, 11, day).unwrap(),
            busy_share_pct: v,
        }
    }

    #[test]
    fn rows_keep_first_appearance_and_columns_cover_every_day() {
        let g =
            grid(&[cell("b/0", 3, Some(10.0)), cell("a/0", 1, Some(20.0)), cell("b/0", 1, None)]).unwrap();
        assert_eq!(g.rows, vec!["b/0", "a/0"]);
        assert_eq!(g.columns, vec!["Nov 01", "Nov 02", "Nov 03"]);
        assert_eq!(g.values, vec![None, None, Some(10.0), Some(20.0), None, None]);
    }

    #[test]
    fn no_cells_no_grid() {
        assert!(grid(&[]).is_none());
    }
}
