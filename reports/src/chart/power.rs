//! The power chart: the fleet's mean power draw (kW, left axis) and the
//! energy used since the period started (kWh, right axis), over time.
//!
//! Power is plotted at the middle of each bucket and energy at its end (it
//! counts up to the end of the bucket). Both lines break where the series
//! has a gap, rather than drawing a straight line across it.

use std::path::Path;

use plotters::chart::ChartBuilder;
use plotters::coord::combinators::BindKeyPoints;
use plotters::series::LineSeries;
use plotters::style::Color;

use super::axis::{self, Side, Ticked};
use super::canvas::{self, Area, DrawError};
use super::context::ChartContext;
use super::error::ChartError;
use super::frame;
use super::legend::{Entry, Swatch};
use super::name::ChartName;
use super::palette::{BUSY, SECOND_LINE};
use super::rect::Rect;
use super::series::PowerPoint;
use super::text;
use super::time_axis;
use crate::number::grouped;

/// Draws the power chart of `points` (in any order) into the PNG `out`.
/// Points whose power or energy is not finite leave a gap in that line.
pub fn power(points: &[PowerPoint], ctx: &ChartContext, out: &Path) -> Result<(), ChartError> {
    canvas::write_png(ChartName::Power, ctx, out, |root| draw(points, ctx, root))
}

/// Draws the chart on `root`; returns the plot rectangle, `None` when
/// there was nothing to plot.
pub(super) fn draw(
    points: &[PowerPoint],
    ctx: &ChartContext,
    root: &Area<'_>,
) -> Result<Option<Rect>, DrawError> {
    let legend = [
        Entry::new("Fleet power (kW, left axis)", Swatch::Line(BUSY)),
        Entry::new("Energy since period start (kWh, right axis)", Swatch::Line(SECOND_LINE)),
    ];
    let frame = frame::draw(root, ChartName::Power, ctx, &legend)?;
    let mut points = points.to_vec();
    points.sort_by_key(|p| p.t_ms);
    let times: Vec<i64> = points.iter().map(|p| p.t_ms).collect();
    let Some((bucket, start, end)) = time_axis::bucket_and_span(&times) else {
        frame::no_data(root, &frame)?;
        return Ok(None);
    };

    let finite_max =
        |f: fn(&PowerPoint) -> f64| points.iter().map(f).filter(|v| v.is_finite()).fold(0.0, f64::max);
    let kw_ticks = axis::value_ticks(finite_max(|p| p.power_kw) * 1.08, 7);
    let kwh_ticks = axis::value_ticks(finite_max(|p| p.energy_kwh) * 1.04, 7);
    let kw_label = |v: f64| grouped(v, decimals(&kw_ticks));
    let kwh_label = |v: f64| grouped(v, decimals(&kwh_ticks));
    let tick = axis::tick_font(&frame);
    let widest = |ticks: &[f64], label: &dyn Fn(f64) -> String| {
        ticks.iter().map(|v| text::width(&label(*v), &tick)).max().unwrap_or(0)
    };
    let left_area = axis::y_area(&frame, widest(&kw_ticks, &kw_label));
    let right_area = axis::y_area(&frame, widest(&kwh_ticks, &kwh_label));
    let plot_width = frame.body.width() - left_area - right_area;
    let time = time_axis::fitted(&frame, start, end, plot_width);

    let body = frame::body_area(root, &frame);
    let x = time.range.clone().with_key_points(time.ticks.clone()).with_light_points(time.minor.clone());
    let kw_max = kw_ticks.last().copied().unwrap_or(1.0);
    let kwh_max = kwh_ticks.last().copied().unwrap_or(1.0);
    let mut chart = ChartBuilder::on(&body)
        .margin_top(frame.px(8.0))
        .x_label_area_size(axis::x_area(&frame))
        .y_label_area_size(left_area)
        .right_y_label_area_size(right_area)
        .build_cartesian_2d(x, Ticked::new(0.0..kw_max, kw_ticks.clone()))?
        .set_secondary_coord(time.range.clone(), Ticked::new(0.0..kwh_max, kwh_ticks.clone()));
    let mut mesh = chart.configure_mesh();
    axis::style_mesh(&mut mesh, &frame);
    mesh.draw()?;
    chart
        .configure_secondary_axes()
        .axis_style(super::palette::AXIS.stroke_width(1))
        .set_all_tick_mark_size(frame.px(5.0))
        .x_label_formatter(&|_| String::new())
        .y_label_formatter(&|_| String::new())
        .draw()?;

    let power_line = BUSY.stroke_width(frame.px(2.0).max(1) as u32);
    for run in runs(&points, bucket, |p| p.power_kw) {
        let line = run.iter().map(|(t, v)| (t + bucket / 2, *v));
        chart.draw_series(LineSeries::new(line, power_line))?;
    }
    let energy_line = SECOND_LINE.stroke_width(frame.px(3.0).max(1) as u32);
    for run in runs(&points, bucket, |p| p.energy_kwh) {
        let line = run.iter().map(|(t, v)| (t + bucket, *v));
        chart.draw_secondary_series(LineSeries::new(line, energy_line))?;
    }

    let plot = axis::plot_rect(chart.plotting_area().get_pixel_range());
    let left: Vec<_> = kw_ticks.iter().map(|v| (chart.backend_coord(&(start, *v)).1, kw_label(*v))).collect();
    axis::y_labels(root, &frame, plot, Side::Left, BUSY, &left)?;
    let secondary = chart.borrow_secondary();
    let right: Vec<_> =
        kwh_ticks.iter().map(|v| (secondary.backend_coord(&(start, *v)).1, kwh_label(*v))).collect();
    axis::y_labels(root, &frame, plot, Side::Right, SECOND_LINE, &right)?;
    let x_labels: Vec<_> =
        time.ticks.iter().map(|t| (chart.backend_coord(&(*t, 0.0)).0, time.label(*t))).collect();
    axis::x_labels(root, &frame, plot, &x_labels)?;
    axis::titles(
        root,
        &frame,
        plot,
        Some("Time (UTC)"),
        Some("Fleet power (kW)"),
        Some("Energy since period start (kWh)"),
    )?;
    Ok(Some(plot))
}

/// Decimals the tick labels need: none when the step is whole.
fn decimals(ticks: &[f64]) -> usize {
    let step = ticks.get(1).copied().unwrap_or(1.0);
    if (step - step.round()).abs() < 1e-9 {
        0
    } else if (step * 10.0 - (step * 10.0).round()).abs() < 1e-9 {
        1
    } else {
        2
    }
}

/// The unbroken runs of `value` over the sorted points: a run ends at a
/// non-finite value or where the next point is more than a bucket and a
/// half later.
fn runs(sorted: &[PowerPoint], bucket: i64, value: fn(&PowerPoint) -> f64) -> Vec<Vec<(i64, f64)>> {
    runs_of(sorted, bucket, |p| (p.t_ms, value(p)))
}

/// [`runs`] of any points, each a time (ms) and a value.
pub(super) fn runs_of<P>(
    sorted: &[P],
    bucket: i64,
    point: impl Fn(&P) -> (i64, f64),
) -> Vec<Vec<(i64, f64)>> {
    let mut out: Vec<Vec<(i64, f64)>> = Vec::new();
    let mut current: Vec<(i64, f64)> = Vec::new();
    for p in sorted {
        let (t, v) = point(p);
        let joined = current.last().is_some_and(|(last, _)| t - last <= bucket + bucket / 2);
        if (!joined || !v.is_finite()) && !current.is_empty() {
            out.push(std::mem::take(&mut current));
        }
        if v.is_finite() {
            current.push((t, v));
        }
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(t_ms: i64, power_kw: f64) -> PowerPoint {
        PowerPoint { t_ms, power_kw, energy_kwh: 0.0 }
    }

    #[test]
    fn runs_break_at_gaps_and_bad_values() {
        let points = [point(0, 1.0), point(10, 2.0), point(20, f64::NAN), point(30, 3.0), point(60, 4.0)];
        let got = runs(&points, 10, |p| p.power_kw);
        assert_eq!(got, vec![vec![(0, 1.0), (10, 2.0)], vec![(30, 3.0)], vec![(60, 4.0)]]);
    }

    #[test]
    fn tick_labels_use_the_decimals_the_step_needs() {
        assert_eq!(decimals(&[0.0, 5.0]), 0);
        assert_eq!(decimals(&[0.0, 0.5]), 1);
        assert_eq!(decimals(&[0.0, 0.25]), 2);
    }
}
