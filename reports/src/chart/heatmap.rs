//! The heatmap both grid charts share ([`super::hour_of_week`] and
//! [`super::gpu_days`]): labelled rows and columns of cells coloured on
//! the viridis scale by a percentage (each chart names its own), a colour
//! scale bar with percent labels, and the no-data hatch for cells without
//! samples.
//!
//! The grid is laid out here in canvas pixels (no plotters coordinates) so
//! cells tile exactly and labels can be thinned when rows or columns are
//! too narrow to label each one. The chart modules turn their cells into a
//! [`Grid`]; this module draws it and reports where each cell landed.

use plotters::element::{PathElement, Rectangle};
use plotters::style::{Color, WHITE};

use super::canvas::{Area, DrawError, DrawResult};
use super::frame::Frame;
use super::palette::{self, AXIS, INK};
use super::rect::Rect;
use super::text::{self, Align, Font, Line};
use super::{axis, legend};

/// Percent values with a labelled tick on the colour scale.
const SCALE_TICKS: [f64; 5] = [0.0, 25.0, 50.0, 75.0, 100.0];

/// What to draw: row and column labels, and one value per cell.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Grid {
    /// Row labels, top to bottom.
    pub(super) rows: Vec<String>,
    /// Column labels, left to right.
    pub(super) columns: Vec<String>,
    /// The chart's percentage per cell, row by row; `None` is no data.
    pub(super) values: Vec<Option<f64>>,
    /// Title under the columns, with units.
    pub(super) x_title: String,
    /// Title beside the rows.
    pub(super) y_title: String,
    /// Title of the colour scale: what the percentage is, `Mean
    /// utilization (%)`.
    pub(super) scale_title: String,
    /// Print each cell's value in it when the cells are big enough.
    pub(super) print_values: bool,
    /// Leave a gap between rows whose labels differ before the first `/`
    /// (GPUs of different hosts), and label such groups once when rows are
    /// too thin to label each.
    pub(super) group_rows: bool,
    /// Label every row, in a smaller font where rows are thin, rather than
    /// every other one.
    pub(super) label_every_row: bool,
}

impl Grid {
    fn value(&self, row: usize, col: usize) -> Option<f64> {
        self.values.get(row * self.columns.len() + col).copied().flatten()
    }
}

/// Where the cells landed on the canvas.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Cells {
    left: f64,
    top: f64,
    cell_w: f64,
    cell_h: f64,
    /// White pixels between neighbouring cells.
    gap: i32,
    /// Extra space between row groups, in pixels.
    group_gap: f64,
    /// The group of each row, counting from 0 at the top.
    group_of: Vec<usize>,
}

impl Cells {
    /// The pixels of the cell at `row`, `col`: `left..right`, `top..bottom`.
    pub(super) fn rect(&self, row: usize, col: usize) -> Rect {
        let x = |c: usize| (self.left + c as f64 * self.cell_w).round() as i32;
        let shift = self.group_of.get(row).copied().unwrap_or(0) as f64 * self.group_gap;
        let y = |r: usize| (self.top + r as f64 * self.cell_h + shift).round() as i32;
        Rect { left: x(col), top: y(row), right: x(col + 1) - self.gap, bottom: y(row + 1) - self.gap }
    }
}

/// The legend entry that explains the hatch.
pub(super) fn legend() -> Vec<legend::Entry> {
    vec![legend::Entry::new("No samples", legend::Swatch::NoData)]
}

/// A row's group: its label up to the first `/` (the host of a GPU).
fn group_key(label: &str) -> &str {
    label.split('/').next().unwrap_or(label)
}

/// Runs of consecutive rows with the same group key: (key, first row,
/// last row). One run of everything when the grid is not grouped or some
/// label has no `/`.
fn row_groups(grid: &Grid) -> Vec<(String, usize, usize)> {
    let grouped = grid.group_rows && grid.rows.iter().all(|r| r.contains('/'));
    let mut runs: Vec<(String, usize, usize)> = Vec::new();
    for (row, label) in grid.rows.iter().enumerate() {
        let key = if grouped { group_key(label) } else { "" };
        match runs.last_mut() {
            Some((last, _, end)) if last == key => *end = row,
            _ => runs.push((key.to_owned(), row, row)),
        }
    }
    runs
}

/// How rows are labelled.
enum RowLabels {
    /// Each row its full label, every `step`-th row.
    Each { labels: Vec<String>, font: Font, step: usize },
    /// Too many rows for full labels: the group key once per group, and the
    /// part after the `/` (the GPU index) every `step`-th row.
    Grouped {
        groups: Vec<(String, usize, usize)>,
        key_font: Font,
        index: Vec<String>,
        font: Font,
        step: usize,
    },
}

impl RowLabels {
    fn choose(grid: &Grid, frame: &Frame, cell_h: f64, groups: Vec<(String, usize, usize)>) -> Self {
        let tick = axis::tick_font(frame);
        let (font, step) = if grid.label_every_row {
            (Font { size: tick.size.min(cell_h / 1.2), ..tick }, 1)
        } else {
            let font = Font { size: tick.size.min(cell_h * 0.9).max(frame.size(11.0)), ..tick };
            (font, ((font.size * 1.2) / cell_h).ceil().max(1.0) as usize)
        };
        let max_width = frame.body.width() / 5;
        let grouped = groups.len() > 1 && step > 1 && groups.iter().any(|(_, first, last)| last > first);
        if grouped {
            let index = grid.rows.iter().map(|r| r.rsplit('/').next().unwrap_or(r).to_owned()).collect();
            let groups =
                groups.into_iter().map(|(key, a, b)| (text::fit(&key, &tick, max_width), a, b)).collect();
            RowLabels::Grouped { groups, key_font: tick, index, font, step }
        } else {
            let labels = grid.rows.iter().map(|r| text::fit(r, &font, max_width)).collect();
            RowLabels::Each { labels, font, step }
        }
    }

    /// Pixels the labels need left of the grid.
    fn width(&self, frame: &Frame) -> i32 {
        let widest = |labels: &mut dyn Iterator<Item = &String>, font: &Font| {
            labels.map(|l| text::width(l, font)).max().unwrap_or(0)
        };
        match self {
            RowLabels::Each { labels, font, .. } => widest(&mut labels.iter(), font),
            RowLabels::Grouped { groups, key_font, index, font, .. } => {
                widest(&mut groups.iter().map(|g| &g.0), key_font)
                    + frame.px(12.0)
                    + widest(&mut index.iter(), font)
            }
        }
    }

    fn draw(&self, root: &Area<'_>, frame: &Frame, cells: &Cells) -> DrawResult {
        let right = cells.left.round() as i32 - frame.px(10.0);
        let row_y = |row: usize| cells.rect(row, 0).centre().1;
        match self {
            RowLabels::Each { labels, font, step } => {
                for (row, label) in labels.iter().enumerate().step_by(*step) {
                    text::draw(root, label, font, (right, row_y(row)), Align::Right, Line::Middle)?;
                }
            }
            RowLabels::Grouped { groups, key_font, index, font, step } => {
                let index_w = index.iter().map(|l| text::width(l, font)).max().unwrap_or(0);
                let key_right = right - index_w - frame.px(12.0);
                for (key, first, last) in groups {
                    let middle = (cells.rect(*first, 0).top + cells.rect(*last, 0).bottom) / 2;
                    text::draw(root, key, key_font, (key_right, middle), Align::Right, Line::Middle)?;
                    for row in (*first..=*last).step_by(*step) {
                        text::draw(root, &index[row], font, (right, row_y(row)), Align::Right, Line::Middle)?;
                    }
                }
            }
        }
        Ok(())
    }
}

/// Draws `grid` in the frame's body; returns where the cells are.
pub(super) fn draw(root: &Area<'_>, frame: &Frame, grid: &Grid) -> Result<Cells, DrawError> {
    let body = frame.body;
    let (n_rows, n_cols) = (grid.rows.len().max(1), grid.columns.len().max(1));
    let tick = axis::tick_font(frame);

    // Room for the scale bar on the right and the column labels below.
    let scale_labels: Vec<String> = SCALE_TICKS.iter().map(|p| format!("{p:.0}%")).collect();
    let scale_label_w = scale_labels.iter().map(|l| text::width(l, &tick)).max().unwrap_or(0);
    let bar_w = frame.px(22.0);
    let right_room = frame.px(36.0) + bar_w + frame.px(10.0) + scale_label_w + frame.px(44.0);
    let grid_top = f64::from(body.top + frame.px(6.0));
    let grid_bottom = f64::from(body.bottom - axis::x_area(frame));

    let groups = row_groups(grid);
    let group_gap = if groups.len() > 1 { f64::from(frame.px(4.0)) } else { 0.0 };
    let cell_h = (grid_bottom - grid_top - group_gap * (groups.len().max(1) - 1) as f64) / n_rows as f64;
    let mut group_of = vec![0; grid.rows.len()];
    for (g, (_, first, last)) in groups.iter().enumerate() {
        group_of[*first..=*last].fill(g);
    }
    let row_labels = RowLabels::choose(grid, frame, cell_h, groups);

    let grid_left = f64::from(body.left + frame.px(34.0) + row_labels.width(frame) + frame.px(12.0));
    let grid_right = f64::from(body.right - right_room);
    let cell_w = (grid_right - grid_left) / n_cols as f64;
    let gap = if cell_w >= 24.0 && cell_h >= 24.0 {
        2
    } else if cell_w >= 6.0 && cell_h >= 6.0 {
        1
    } else {
        0
    };
    let cells = Cells { left: grid_left, top: grid_top, cell_w, cell_h, gap, group_gap, group_of };

    let hatch_spacing = frame.px(7.0);
    let value_font = Font::regular(frame.size(17.0), INK);
    let print_values = grid.print_values
        && cell_h >= value_font.size * 1.6
        && cell_w >= f64::from(text::width("100", &value_font)) + 6.0;
    for row in 0..grid.rows.len() {
        for col in 0..grid.columns.len() {
            let r = cells.rect(row, col);
            match grid.value(row, col) {
                Some(pct) => {
                    let colour = palette::utilization(pct);
                    // Filled rectangles stop short of their far corner.
                    root.draw(&Rectangle::new([(r.left, r.top), (r.right, r.bottom)], colour.filled()))?;
                    if print_values {
                        let ink = if palette::needs_light_text(colour) { WHITE } else { INK };
                        let font = Font { colour: ink, ..value_font };
                        let value = format!("{:.0}", pct.clamp(0.0, 100.0));
                        text::draw(root, &value, &font, r.centre(), Align::Centre, Line::Middle)?;
                    }
                }
                None => palette::hatch(root, r, hatch_spacing)?,
            }
        }
    }
    row_labels.draw(root, frame, &cells)?;

    // Column labels, thinned so they never touch.
    let col_label_w = grid.columns.iter().map(|c| text::width(c, &tick)).max().unwrap_or(0);
    let col_step = ((f64::from(col_label_w) + f64::from(frame.px(14.0))) / cell_w).ceil().max(1.0) as usize;
    let label_y = grid_bottom as i32 + frame.px(12.0);
    for (col, label) in grid.columns.iter().enumerate().step_by(col_step) {
        let r = cells.rect(0, col);
        text::draw(root, label, &tick, ((r.left + r.right) / 2, label_y), Align::Centre, Line::Top)?;
    }

    let grid_rect = Rect {
        left: grid_left as i32,
        top: grid_top as i32,
        right: grid_right as i32,
        bottom: grid_bottom as i32,
    };
    axis::titles(root, frame, grid_rect, Some(&grid.x_title), Some(&grid.y_title), None)?;
    scale_bar(root, frame, grid_rect, bar_w, &scale_labels, &grid.scale_title)?;
    Ok(cells)
}

/// The colour scale to the right of the grid: 0 % at the bottom, 100 % at
/// the top, with its title turned down along the right edge.
fn scale_bar(
    root: &Area<'_>,
    frame: &Frame,
    grid: Rect,
    bar_w: i32,
    labels: &[String],
    title_text: &str,
) -> DrawResult {
    let left = grid.right + frame.px(36.0);
    let (top, bottom) = (grid.top, grid.bottom);
    let height = (bottom - top).max(1);
    for y in top..bottom {
        let t = f64::from(bottom - 1 - y) / f64::from((height - 1).max(1));
        root.draw(&PathElement::new(
            vec![(left, y), (left + bar_w - 1, y)],
            palette::viridis(t).stroke_width(1),
        ))?;
    }
    root.draw(&Rectangle::new([(left, top), (left + bar_w - 1, bottom - 1)], AXIS.stroke_width(1)))?;
    let font = axis::tick_font(frame);
    let tick = frame.px(5.0);
    for (pct, label) in SCALE_TICKS.iter().zip(labels) {
        let y = bottom - 1 - (pct / 100.0 * f64::from(height - 1)).round() as i32;
        root.draw(&PathElement::new(
            vec![(left + bar_w, y), (left + bar_w + tick, y)],
            AXIS.stroke_width(1),
        ))?;
        text::draw(root, label, &font, (left + bar_w + tick + frame.px(5.0), y), Align::Left, Line::Middle)?;
    }
    let title = axis::title_font(frame);
    text::draw_turned(
        root,
        title_text,
        &title,
        (frame.body.right - frame.px(10.0), (top + bottom) / 2),
        false,
    )
}
