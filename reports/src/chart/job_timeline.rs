//! One GPU of one job over the job's time (`apron job ID --out DIR`): its
//! utilization, the memory used on it, and where GPM measured them its SM
//! and tensor activity, each in percent on one axis, as Princeton's
//! jobstats shows a job. The title names the job and the GPU; lines break
//! where a value was not measured or the series has a gap.

use std::path::Path;

use plotters::chart::ChartBuilder;
use plotters::coord::combinators::BindKeyPoints;
use plotters::series::LineSeries;
use plotters::style::{Color, RGBColor};

use super::axis::{self, Side, Ticked};
use super::canvas::{self, Area, DrawError};
use super::context::ChartContext;
use super::error::ChartError;
use super::frame;
use super::legend::{Entry, Swatch};
use super::name::ChartName;
use super::palette::{BUSY, SECOND_LINE, SM_LINE, TENSOR_LINE};
use super::power::runs_of;
use super::rect::Rect;
use super::series::TimelinePoint;
use super::time_axis;

/// A line: its legend label, colour and value.
type Line = (&'static str, RGBColor, fn(&TimelinePoint) -> f64);

/// The lines, in drawing order.
const LINES: [Line; 4] = [
    ("Memory used on the GPU (% of its memory, every process)", SECOND_LINE, |p| p.mem_pct),
    ("GPU utilization (%)", BUSY, |p| p.util_pct),
    ("SM active (%, GPM)", SM_LINE, |p| p.sm_active_pct),
    ("Tensor active (%, GPM)", TENSOR_LINE, |p| p.tensor_active_pct),
];

/// Draws the timeline of `points` (in any order, a bucket each) titled
/// `title` into the PNG `out`. A line no point measured is left out of
/// the legend.
pub fn job_timeline(
    title: &str,
    points: &[TimelinePoint],
    ctx: &ChartContext,
    out: &Path,
) -> Result<(), ChartError> {
    canvas::write_png(ChartName::JobTimeline, ctx, out, |root| draw(title, points, ctx, root))
}

/// Draws the chart on `root`; returns the plot rectangle, `None` when
/// there was nothing to plot.
pub(super) fn draw(
    title: &str,
    points: &[TimelinePoint],
    ctx: &ChartContext,
    root: &Area<'_>,
) -> Result<Option<Rect>, DrawError> {
    let shown: Vec<_> =
        LINES.iter().filter(|(_, _, value)| points.iter().any(|p| value(p).is_finite())).collect();
    let legend: Vec<Entry> =
        shown.iter().map(|(label, colour, _)| Entry::new(*label, Swatch::Line(*colour))).collect();
    let frame = frame::draw_titled(root, title, ctx, &legend)?;
    let mut points = points.to_vec();
    points.sort_by_key(|p| p.t_ms);
    let times: Vec<i64> = points.iter().map(|p| p.t_ms).collect();
    let Some((bucket, start, end)) = time_axis::bucket_and_span(&times) else {
        frame::no_data(root, &frame)?;
        return Ok(None);
    };

    let ticks: Vec<f64> = (0..=5).map(|i| f64::from(i) * 20.0).collect();
    let label = |v: f64| format!("{v:.0}");
    let tick = axis::tick_font(&frame);
    let widest = ticks.iter().map(|v| super::text::width(&label(*v), &tick)).max().unwrap_or(0);
    let left_area = axis::y_area(&frame, widest);
    let time = time_axis::fitted(&frame, start, end, frame.body.width() - left_area);

    let body = frame::body_area(root, &frame);
    let x = time.range.clone().with_key_points(time.ticks.clone()).with_light_points(time.minor.clone());
    let mut chart = ChartBuilder::on(&body)
        .margin_top(frame.px(8.0))
        .margin_right(frame.px(16.0))
        .x_label_area_size(axis::x_area(&frame))
        .y_label_area_size(left_area)
        .build_cartesian_2d(x, Ticked::new(0.0..100.0, ticks.clone()))?;
    let mut mesh = chart.configure_mesh();
    axis::style_mesh(&mut mesh, &frame);
    mesh.draw()?;

    for (_, colour, value) in &shown {
        let line = colour.stroke_width(frame.px(2.0).max(1) as u32);
        for run in runs_of(&points, bucket, |p| (p.t_ms, value(p).clamp(0.0, 100.0))) {
            let run = run.iter().map(|(t, v)| (t + bucket / 2, *v));
            chart.draw_series(LineSeries::new(run, line))?;
        }
    }

    let plot = axis::plot_rect(chart.plotting_area().get_pixel_range());
    let left: Vec<_> = ticks.iter().map(|v| (chart.backend_coord(&(start, *v)).1, label(*v))).collect();
    axis::y_labels(root, &frame, plot, Side::Left, super::palette::TEXT, &left)?;
    let x_labels: Vec<_> =
        time.ticks.iter().map(|t| (chart.backend_coord(&(*t, 0.0)).0, time.label(*t))).collect();
    axis::x_labels(root, &frame, plot, &x_labels)?;
    axis::titles(root, &frame, plot, Some("Time (UTC)"), Some("Percent"), None)?;
    Ok(Some(plot))
}
