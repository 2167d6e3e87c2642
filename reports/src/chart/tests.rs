//! Chart tests: every chart renders a small series to a 1600x900 PNG that
//! decodes and is not blank; the data lands where it should; empty series
//! draw the "no data" frame; text renders from the embedded font.

use std::path::{Path, PathBuf};

use chrono::NaiveDate;
use image::{Rgb, RgbImage};
use plotters::style::RGBColor;

use super::canvas::{self, Rendered};
use super::palette::{self, BUSY, IDLE_HELD, NO_DATA, NO_DATA_LINE, SECOND_LINE};
use super::*;

const HOUR_MS: i64 = 3_600_000;
/// 2026-11-01 00:00 UTC.
const NOV_1: i64 = 1_793_491_200_000;

fn ctx() -> ChartContext {
    ChartContext::new("2026-11-01 00:00 – 2026-12-01 00:00 UTC", "/data/apron", "USD")
}

fn image_of<T>(rendered: &Rendered<T>) -> RgbImage {
    RgbImage::from_raw(rendered.width, rendered.height, rendered.rgb.clone()).unwrap()
}

fn decode(path: &Path) -> RgbImage {
    image::open(path).unwrap().to_rgb8()
}

fn rgb(c: RGBColor) -> Rgb<u8> {
    Rgb([c.0, c.1, c.2])
}

fn distinct_colours(img: &RgbImage) -> usize {
    let mut seen = std::collections::HashSet::new();
    for p in img.pixels() {
        seen.insert(p.0);
    }
    seen.len()
}

fn share_of(img: &RgbImage, colour: Rgb<u8>) -> f64 {
    img.pixels().filter(|p| **p == colour).count() as f64 / f64::from(img.width() * img.height())
}

/// Pixels in the box that are clearly darker than the white background.
fn dark_pixels(img: &RgbImage, (x0, y0): (u32, u32), (x1, y1): (u32, u32)) -> usize {
    let mut n = 0;
    for y in y0..y1 {
        for x in x0..x1 {
            let Rgb([r, g, b]) = *img.get_pixel(x, y);
            if u32::from(r) + u32::from(g) + u32::from(b) < 3 * 160 {
                n += 1;
            }
        }
    }
    n
}

fn fleet() -> Vec<FleetStatePoint> {
    (0..48)
        .map(|h| FleetStatePoint {
            t_ms: NOV_1 + h * HOUR_MS,
            busy: 20.0 + (h % 12) as f64,
            idle_held: 8.0,
            idle_empty: 36.0 - (h % 12) as f64,
            unknown: if h % 24 < 6 { 2.0 } else { 0.0 },
        })
        .collect()
}

fn teams() -> Vec<TeamCost> {
    vec![
        TeamCost { team: "vision".into(), busy_cost: 48_200.0, idle_cost: 6_300.0 },
        TeamCost { team: "speech".into(), busy_cost: 17_400.0, idle_cost: 9_800.0 },
        TeamCost { team: "platform".into(), busy_cost: 3_900.0, idle_cost: 1_240.5 },
    ]
}

fn week() -> Vec<HourOfWeekCell> {
    let mut cells = Vec::new();
    for dow in 0..7 {
        for hour in 0..24 {
            let mean_util_pct = match (dow, hour) {
                (0, 9) => Some(100.0),
                (6, 23) => Some(0.0),
                (3, 12) => None,
                _ => Some(f64::from(dow * 24 + hour) / 168.0 * 100.0),
            };
            cells.push(HourOfWeekCell { dow, hour, mean_util_pct });
        }
    }
    cells
}

fn gpu_month() -> Vec<GpuDayCell> {
    let first = NaiveDate::from_ymd_opt(2026, 12, 1).unwrap();
    let mut cells = Vec::new();
    for (d, day) in first.iter_days().take(31).enumerate() {
        for gpu in 0..64 {
            let busy_share_pct =
                if gpu == 5 && d == 2 { None } else { Some(((gpu * 7 + d * 3) % 101) as f64) };
            cells.push(GpuDayCell {
                gpu: format!("node{:02}/{}", gpu / 8 + 1, gpu % 8),
                day,
                busy_share_pct,
            });
        }
    }
    cells
}

fn power_series() -> Vec<PowerPoint> {
    let mut energy = 0.0;
    (0..72)
        .map(|h| {
            let power_kw = 30.0 + 10.0 * ((h as f64) / 4.0).sin();
            energy += power_kw;
            PowerPoint { t_ms: NOV_1 + h * HOUR_MS, power_kw, energy_kwh: energy }
        })
        .collect()
}

/// Renders every chart with data into `dir`; returns the files.
fn render_all(dir: &Path) -> Vec<PathBuf> {
    let c = ctx();
    let path = |chart: ChartName| dir.join(chart.file_name());
    fleet_state(&fleet(), &c, &path(ChartName::FleetState)).unwrap();
    idle_cost(&teams(), &c, &path(ChartName::IdleCost)).unwrap();
    team_spend(&teams(), &c, &path(ChartName::TeamSpend)).unwrap();
    hour_of_week(&HourOfWeek { cells: week(), windows: Vec::new() }, &c, &path(ChartName::HourOfWeek))
        .unwrap();
    gpu_days(&gpu_month(), &c, &path(ChartName::GpuDays)).unwrap();
    power(&power_series(), &c, &path(ChartName::Power)).unwrap();
    ChartName::ALL.iter().map(|c| path(*c)).collect()
}

#[test]
fn every_chart_writes_a_full_size_png_that_is_not_blank() {
    let dir = tempfile::tempdir().unwrap();
    for path in render_all(dir.path()) {
        let img = decode(&path);
        // gpu-days grows taller to label each of its 64 GPUs: 64 rows of
        // 14 px and 330 px of frame.
        let height = if path.ends_with("gpu-days.png") { 64 * 14 + 330 } else { 900 };
        assert_eq!(img.dimensions(), (1600, height), "{}", path.display());
        assert!(distinct_colours(&img) > 100, "{} has {} colours", path.display(), distinct_colours(&img));
        let white = share_of(&img, Rgb([255, 255, 255]));
        assert!(white < 0.97, "{} is {:.0}% white", path.display(), white * 100.0);
    }
    let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(names.len(), 6, "no temp files left behind: {names:?}");
}

#[test]
fn rendering_again_overwrites() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("power.png");
    power(&power_series(), &ctx(), &path).unwrap();
    assert!(share_of(&decode(&path), rgb(SECOND_LINE)) > 0.001);
    power(&[], &ctx(), &path).unwrap();
    // Only the legend's swatch is left of the energy line.
    assert!(share_of(&decode(&path), rgb(SECOND_LINE)) < 0.0002);
}

#[test]
fn text_renders_from_the_embedded_font() {
    let rendered = canvas::render(ChartName::FleetState, &ctx(), Path::new("x.png"), |root| {
        fleet_state::draw(&[], &ctx(), root)
    })
    .unwrap();
    let img = image_of(&rendered);
    // The title, the footer and the "no data" message all have ink; the
    // strip above the title has none.
    assert!(dark_pixels(&img, (40, 20), (900, 70)) > 2000, "title");
    assert!(dark_pixels(&img, (40, 860), (900, 890)) > 300, "footer");
    assert!(dark_pixels(&img, (600, 440), (1000, 500)) > 300, "no-data message");
    assert_eq!(dark_pixels(&img, (0, 0), (1600, 12)), 0);
}

#[test]
fn empty_series_draw_the_no_data_frame() {
    let c = ctx();
    let p = Path::new("x.png");
    let none = [
        canvas::render(ChartName::FleetState, &c, p, |r| fleet_state::draw(&[], &c, r))
            .unwrap()
            .extra
            .is_none(),
        canvas::render(ChartName::IdleCost, &c, p, |r| idle_cost::draw(&[], &c, r)).unwrap().extra.is_none(),
        canvas::render(ChartName::TeamSpend, &c, p, |r| team_spend::draw(&[], &c, r))
            .unwrap()
            .extra
            .is_none(),
        canvas::render(ChartName::HourOfWeek, &c, p, |r| hour_of_week::draw(&HourOfWeek::default(), &c, r))
            .unwrap()
            .extra
            .is_none(),
        canvas::render(ChartName::GpuDays, &c, p, |r| gpu_days::draw(&[], &c, r)).unwrap().extra.is_none(),
        canvas::render(ChartName::Power, &c, p, |r| power::draw(&[], &c, r)).unwrap().extra.is_none(),
    ];
    assert_eq!(none, [true; 6]);

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("idle-cost.png");
    idle_cost(&[], &c, &path).unwrap();
    let img = decode(&path);
    assert_eq!(img.dimensions(), (1600, 900));
    assert_eq!(share_of(&img, rgb(IDLE_HELD)), 0.0, "no bars");
    assert!(dark_pixels(&img, (600, 440), (1000, 500)) > 300, "the message is in the middle");
}

#[test]
fn hour_of_week_cells_take_the_scale_colour_of_their_value() {
    let c = ctx();
    let rendered = canvas::render(ChartName::HourOfWeek, &c, Path::new("x.png"), |root| {
        hour_of_week::draw(&HourOfWeek { cells: week(), windows: Vec::new() }, &c, root)
    })
    .unwrap();
    let img = image_of(&rendered);
    let cells = rendered.extra.unwrap();
    // Inside the cell but clear of the printed value in its middle.
    let corner = |row, col| {
        let r = cells.rect(row, col);
        *img.get_pixel((r.left + 3) as u32, (r.top + 3) as u32)
    };
    assert_eq!(corner(0, 9), rgb(palette::viridis(1.0)), "Monday 09:00 at 100% is the top of the scale");
    assert_eq!(corner(6, 23), rgb(palette::viridis(0.0)), "Sunday 23:00 at 0% is the bottom");
    let r = cells.rect(3, 12);
    let hatch: Vec<_> = (r.left..r.right).map(|x| *img.get_pixel(x as u32, (r.top + 4) as u32)).collect();
    assert!(
        hatch.iter().all(|p| *p == rgb(NO_DATA) || *p == rgb(NO_DATA_LINE)),
        "Thursday 12:00 is hatched: {hatch:?}"
    );
    assert!(hatch.contains(&rgb(NO_DATA_LINE)));
    // Mondays are the top row, 09:00 left of 10:00.
    assert!(cells.rect(0, 9).top < cells.rect(1, 9).top);
    assert!(cells.rect(0, 9).left < cells.rect(0, 10).left);
}

#[test]
fn gpu_days_keeps_64_gpus_by_31_days_readable() {
    let c = ctx();
    let rendered = canvas::render(ChartName::GpuDays, &c, Path::new("x.png"), |root| {
        gpu_days::draw(&gpu_month(), &c, root)
    })
    .unwrap();
    let img = image_of(&rendered);
    let cells = rendered.extra.unwrap();
    let last = cells.rect(63, 30);
    assert!(last.height() >= 6 && last.width() >= 20, "{last:?}");
    assert!(last.bottom < 800 && last.right < 1450, "the grid leaves room for labels and scale: {last:?}");
    let value = ((63 * 7 + 30 * 3) % 101) as f64;
    let centre = last.centre();
    assert_eq!(*img.get_pixel(centre.0 as u32, centre.1 as u32), rgb(palette::utilization(value)));
    let gap = cells.rect(5, 2).centre();
    let p = *img.get_pixel(gap.0 as u32, gap.1 as u32);
    assert!(p == rgb(NO_DATA) || p == rgb(NO_DATA_LINE), "a missing day is hatched");
}

#[test]
fn bars_and_areas_land_in_their_series_colours() {
    let c = ctx();
    let p = Path::new("x.png");

    let fleet = canvas::render(ChartName::FleetState, &c, p, |r| fleet_state::draw(&fleet(), &c, r)).unwrap();
    let plot = fleet.extra.unwrap();
    let img = image_of(&fleet);
    let (x, _) = plot.centre();
    assert_eq!(*img.get_pixel(x as u32, (plot.bottom - 3) as u32), rgb(BUSY), "busy is the bottom layer");
    // GPUs of unknown state (2 in the first 6 hours of each day) are a layer of their own, on top.
    let unknown_in_plot = (plot.left..plot.right)
        .flat_map(|x| (plot.top..plot.bottom).map(move |y| (x, y)))
        .filter(|(x, y)| *img.get_pixel(*x as u32, *y as u32) == rgb(palette::UNKNOWN))
        .count();
    assert!(unknown_in_plot > 100, "the unknown layer is drawn: {unknown_in_plot} pixels");

    let idle = canvas::render(ChartName::IdleCost, &c, p, |r| idle_cost::draw(&teams(), &c, r)).unwrap();
    let plot = idle.extra.unwrap();
    let img = image_of(&idle);
    let band = plot.height() / 3;
    let y_of = |rank: i32| (plot.top + band * rank + band / 2) as u32;
    let bar_end = |rank: i32| {
        (plot.left..plot.right)
            .rev()
            .find(|x| *img.get_pixel(*x as u32, y_of(rank)) == rgb(IDLE_HELD))
            .unwrap()
    };
    assert!(bar_end(0) > bar_end(1) && bar_end(1) > bar_end(2), "ranked: speech, vision, platform");

    let spend = canvas::render(ChartName::TeamSpend, &c, p, |r| team_spend::draw(&teams(), &c, r)).unwrap();
    let plot = spend.extra.unwrap();
    let img = image_of(&spend);
    // vision has the largest total, so the top bar: busy from the axis,
    // then idle after it.
    let y = y_of(0);
    assert_eq!(*img.get_pixel((plot.left + 3) as u32, y), rgb(BUSY), "busy starts at zero");
    let last = |colour| (plot.left..plot.right).rev().find(|x| *img.get_pixel(*x as u32, y) == rgb(colour));
    assert!(last(IDLE_HELD).unwrap() > last(BUSY).unwrap(), "idle stacked after busy");

    let power = canvas::render(ChartName::Power, &c, p, |r| power::draw(&power_series(), &c, r)).unwrap();
    let img = image_of(&power);
    assert!(share_of(&img, rgb(BUSY)) > 0.001, "the power line");
    assert!(share_of(&img, rgb(SECOND_LINE)) > 0.001, "the energy line");
}

#[test]
fn errors_name_the_output_file() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-folder").join("power.png");
    let err = power(&power_series(), &ctx(), &missing).unwrap_err();
    assert!(matches!(err, ChartError::Write { .. }), "{err:?}");
    assert!(err.to_string().contains(&missing.display().to_string()), "{err}");

    let tiny = ctx().with_size(100, 50);
    let err = fleet_state(&fleet(), &tiny, &dir.path().join("f.png")).unwrap_err();
    assert!(matches!(err, ChartError::CanvasSize { width: 100, height: 50, .. }), "{err:?}");
    assert!(err.to_string().contains("f.png"), "{err}");
}

#[test]
fn other_canvas_sizes_work() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("g.png");
    // 64 GPUs need more than 450 px to label each: (64 × 14 + 330) / 2.
    gpu_days(&gpu_month(), &ctx().with_size(800, 450), &path).unwrap();
    assert_eq!(decode(&path).dimensions(), (800, 613));
    // 16 fit.
    let sixteen: Vec<GpuDayCell> = gpu_month()
        .into_iter()
        .filter(|c| c.gpu.starts_with("node01") || c.gpu.starts_with("node02"))
        .collect();
    gpu_days(&sixteen, &ctx().with_size(800, 450), &path).unwrap();
    assert_eq!(decode(&path).dimensions(), (800, 450));
}

#[test]
fn chart_names_parse_and_list_the_known_ones() {
    for chart in ChartName::ALL {
        assert_eq!(chart.name().parse::<ChartName>(), Ok(chart));
        assert_eq!(chart.file_name(), format!("{chart}.png"));
        assert!(!chart.title().is_empty());
    }
    let err = "fleet".parse::<ChartName>().unwrap_err();
    assert_eq!(
        err.to_string(),
        "unknown chart 'fleet'; known charts: fleet-state, idle-cost, team-spend, hour-of-week, gpu-days, power"
    );
    assert_eq!(ChartName::FleetState.file_name(), "fleet-state.png");
}

#[test]
fn context_defaults_to_1600_by_900() {
    let c = ChartContext::new("p", "d", "EUR");
    assert_eq!((c.width, c.height), (1600, 900));
    assert_eq!(ChartContext::default().currency, "USD");
}
