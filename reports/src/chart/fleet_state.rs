//! The fleet-state chart: how many GPUs were busy, idle with memory held,
//! idle and empty, and of unknown state (no activity reported), over the
//! period, as stacked areas.
//!
//! Each point is a bucket's mean, drawn as a step across the bucket; a gap
//! in the series (the recorder was down) drops to zero rather than drawing
//! a line across the hole.

use std::path::Path;

use plotters::chart::ChartBuilder;
use plotters::coord::combinators::BindKeyPoints;
use plotters::series::AreaSeries;
use plotters::style::{Color, RGBColor};

use super::axis::Side;
use super::canvas::{self, Area, DrawError};
use super::context::ChartContext;
use super::error::ChartError;
use super::frame;
use super::legend::{Entry, Swatch};
use super::name::ChartName;
use super::palette::{BUSY, IDLE_EMPTY, IDLE_HELD, TEXT, UNKNOWN};
use super::rect::Rect;
use super::series::FleetStatePoint;
use super::time_axis::{self, LONE_BUCKET_MS};
use super::{axis, text};
use crate::number::grouped;

/// A count read off a point.
type Measure = fn(&FleetStatePoint) -> f64;

/// Draws the fleet-state chart of `points` (in any order) into the PNG
/// `out`. Counts that are negative or not finite are drawn as zero.
pub fn fleet_state(points: &[FleetStatePoint], ctx: &ChartContext, out: &Path) -> Result<(), ChartError> {
    canvas::write_png(ChartName::FleetState, ctx, out, |root| draw(points, ctx, root))
}

/// Draws the chart on `root`; returns the plot rectangle, `None` when
/// there was nothing to plot.
pub(super) fn draw(
    points: &[FleetStatePoint],
    ctx: &ChartContext,
    root: &Area<'_>,
) -> Result<Option<Rect>, DrawError> {
    let legend = [
        Entry::new("Busy", Swatch::Fill(BUSY)),
        Entry::new("Idle, memory held", Swatch::Fill(IDLE_HELD)),
        Entry::new("Idle, empty", Swatch::Fill(IDLE_EMPTY)),
        Entry::new("Unknown", Swatch::Fill(UNKNOWN)),
    ];
    let frame = frame::draw(root, ChartName::FleetState, ctx, &legend)?;
    let mut points: Vec<FleetStatePoint> = points.iter().map(clean).collect();
    points.sort_by_key(|p| p.t_ms);
    let (Some(first), Some(last)) = (points.first(), points.last()) else {
        frame::no_data(root, &frame)?;
        return Ok(None);
    };
    let bucket = bucket_ms(&points);
    let (start, end) = (first.t_ms, last.t_ms.saturating_add(bucket));

    let top = points.iter().map(total).fold(0.0, f64::max);
    let y_ticks = axis::value_ticks(top * 1.04, 8);
    let y_max = y_ticks.last().copied().unwrap_or(1.0);
    let count_label = |v: f64| grouped(v, if v.fract().abs() < 1e-9 { 0 } else { 1 });
    let tick = axis::tick_font(&frame);
    let widest = y_ticks.iter().map(|v| text::width(&count_label(*v), &tick)).max().unwrap_or(0);
    let y_area = axis::y_area(&frame, widest);
    let plot_width = frame.body.width() - y_area - frame.px(24.0);
    let time = time_axis::fitted(&frame, start, end, plot_width);

    let body = frame::body_area(root, &frame);
    let x = time.range.clone().with_key_points(time.ticks.clone()).with_light_points(time.minor.clone());
    let y = axis::Ticked::new(0.0..y_max, y_ticks.clone());
    let mut chart = ChartBuilder::on(&body)
        .margin_top(frame.px(8.0))
        .margin_right(frame.px(24.0))
        .x_label_area_size(axis::x_area(&frame))
        .y_label_area_size(y_area)
        .build_cartesian_2d(x, y)?;
    let mut mesh = chart.configure_mesh();
    axis::style_mesh(&mut mesh, &frame);
    mesh.draw()?;

    // Stacked by drawing each running total over the previous one, largest
    // first, all down to zero.
    let layers: [(Measure, RGBColor); 4] = [
        (total, UNKNOWN),
        (|p| p.busy + p.idle_held + p.idle_empty, IDLE_EMPTY),
        (|p| p.busy + p.idle_held, IDLE_HELD),
        (|p| p.busy, BUSY),
    ];
    for (value, colour) in layers {
        let outline = steps(&points, bucket, value);
        chart.draw_series(
            AreaSeries::new(outline, 0.0, colour.filled()).border_style(colour.stroke_width(1)),
        )?;
    }

    let plot = axis::plot_rect(chart.plotting_area().get_pixel_range());
    let y_labels: Vec<_> =
        y_ticks.iter().map(|v| (chart.backend_coord(&(start, *v)).1, count_label(*v))).collect();
    axis::y_labels(root, &frame, plot, Side::Left, TEXT, &y_labels)?;
    let x_labels: Vec<_> =
        time.ticks.iter().map(|t| (chart.backend_coord(&(*t, 0.0)).0, time.label(*t))).collect();
    axis::x_labels(root, &frame, plot, &x_labels)?;
    axis::titles(root, &frame, plot, Some("Time (UTC)"), Some("GPUs (mean count)"), None)?;
    Ok(Some(plot))
}

/// Every GPU of a point, whatever its state.
fn total(p: &FleetStatePoint) -> f64 {
    p.busy + p.idle_held + p.idle_empty + p.unknown
}

fn clean(p: &FleetStatePoint) -> FleetStatePoint {
    let ok = |v: f64| if v.is_finite() && v > 0.0 { v } else { 0.0 };
    FleetStatePoint {
        t_ms: p.t_ms,
        busy: ok(p.busy),
        idle_held: ok(p.idle_held),
        idle_empty: ok(p.idle_empty),
        unknown: ok(p.unknown),
    }
}

/// The bucket width: the smallest step between consecutive points (gaps
/// are larger), or an hour for a single point.
fn bucket_ms(sorted: &[FleetStatePoint]) -> i64 {
    sorted.windows(2).map(|w| w[1].t_ms - w[0].t_ms).filter(|d| *d > 0).min().unwrap_or(LONE_BUCKET_MS)
}

/// The outline of a step area: each point holds its value for one bucket;
/// where the next point is later than that, the outline drops to zero.
fn steps(sorted: &[FleetStatePoint], bucket: i64, value: Measure) -> Vec<(i64, f64)> {
    let mut out = Vec::with_capacity(sorted.len() * 2 + 2);
    for (i, p) in sorted.iter().enumerate() {
        let v = value(p);
        let bucket_end = p.t_ms.saturating_add(bucket);
        let next = sorted.get(i + 1).map(|n| n.t_ms);
        out.push((p.t_ms, v));
        match next {
            Some(next) if next <= bucket_end => out.push((next, v)),
            _ => {
                out.push((bucket_end, v));
                out.push((bucket_end, 0.0));
                if let Some(next) = next {
                    out.push((next, 0.0));
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(t_ms: i64, busy: f64) -> FleetStatePoint {
        FleetStatePoint { t_ms, busy, idle_held: 1.0, idle_empty: 2.0, unknown: 0.0 }
    }

    #[test]
    fn steps_hold_each_bucket_and_drop_in_gaps() {
        let points = [point(0, 5.0), point(10, 6.0), point(40, 7.0)];
        assert_eq!(bucket_ms(&points), 10);
        let outline = steps(&points, 10, |p| p.busy);
        assert_eq!(
            outline,
            vec![
                (0, 5.0),
                (10, 5.0),
                (10, 6.0),
                (20, 6.0),
                (20, 0.0),
                (40, 0.0),
                (40, 7.0),
                (50, 7.0),
                (50, 0.0)
            ]
        );
    }

    #[test]
    fn bad_counts_become_zero() {
        let p = clean(&FleetStatePoint {
            t_ms: 1,
            busy: f64::NAN,
            idle_held: -2.0,
            idle_empty: 3.0,
            unknown: f64::INFINITY,
        });
        assert_eq!((p.busy, p.idle_held, p.idle_empty, p.unknown), (0.0, 0.0, 3.0, 0.0));
        assert_eq!(total(&p), 3.0);
    }
}
