//! The charts of `tickfan report`, drawn with plotters into SVG strings (so
//! the same drawing is written as a file and inlined in `report.html`).
//!
//! A chart is a stack of panels; a panel groups series of one latency range
//! (the slow subscribers' seconds never squash the feed's microseconds) and
//! draws them twice, side by side:
//!
//! ```text
//! ┌ panel title ─────────────────────────────────────────────────────────┐
//! │ by percentile (x: 50% … 99.99%, log)   │ p99 per interval (x: s)     │
//! │  p50, p99, p99.9 marked (●), values     │  a missing interval breaks  │
//! │    written beside the marks             │  the line; the last, partial│
//! │                                         │  interval is a hollow mark  │
//! │ legend: name — p50 · p99 · p99.9 · count                             │
//! └──────────────────────────────────────────────────────────────────────┘
//! ```
//!
//! - The y unit of a panel (µs, ms or s) is chosen for its largest value.
//! - Within a chart every series has its own colour *and* line style
//!   (solid, dashed, dotted, long dash, …), assigned in order;
//!   [`MAX_SERIES`] series per chart at most, so neither repeats.

use plotters::coord::Shift;
use plotters::element::DashedPathElement;
use plotters::prelude::*;

use super::report::{Point, Series};
use tickfan::metrics::report::round3;

/// Series per chart, at most (distinct colours).
pub const MAX_SERIES: usize = 8;

/// Up to this many series in a panel, each mark has its value written
/// beside it; past it the marks stay and the values are in the legend only
/// (five labels per mark would overlap).
const LABELLED: usize = 3;

/// Colour-blind-friendly, distinct (Okabe–Ito, then two darks).
const COLORS: [RGBColor; MAX_SERIES] = [
    RGBColor(0, 114, 178),   // blue
    RGBColor(213, 94, 0),    // vermillion
    RGBColor(0, 158, 115),   // bluish green
    RGBColor(204, 121, 167), // reddish purple
    RGBColor(230, 159, 0),   // orange
    RGBColor(86, 180, 233),  // sky blue
    RGBColor(60, 60, 60),    // dark grey
    RGBColor(140, 86, 75),   // brown
];

/// Dash (length, gap) in pixels; `None` = solid. As many as colours.
const DASHES: [Option<(u32, u32)>; MAX_SERIES] = [
    None,
    Some((9, 5)),
    Some((2, 4)),
    Some((18, 5)),
    Some((5, 10)),
    Some((28, 4)),
    Some((1, 9)),
    Some((12, 12)),
];

/// A series as drawn: its label and the data.
#[derive(Debug)]
pub struct Drawn<'a> {
    /// What a trader calls it.
    pub label: String,
    /// The data.
    pub series: &'a Series,
}

/// One panel of a chart.
#[derive(Debug)]
pub struct Panel<'a> {
    /// Its title.
    pub title: String,
    /// Its series (empty ones are skipped).
    pub series: Vec<Drawn<'a>>,
}

/// A display unit for latencies: name and µs per unit.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Unit {
    /// `µs`, `ms` or `s`.
    pub name: &'static str,
    /// Microseconds per unit.
    pub us: f64,
}

/// The unit for a range whose largest value is `max_us`.
pub fn unit_for(max_us: f64) -> Unit {
    if max_us >= 1e6 {
        Unit { name: "s", us: 1e6 }
    } else if max_us >= 1e3 {
        Unit {
            name: "ms",
            us: 1e3,
        }
    } else {
        Unit {
            name: "µs",
            us: 1.0,
        }
    }
}

/// `v_us` in its own unit, 3 significant digits: `45.6 µs`, `1.23 ms`, `2.05 s`.
///
/// Rounded by [`round3`] first, the rounding `summary.json` uses, so a page
/// never shows `1.06 µs` beside a JSON `1.07` (a binary `1.065` formats
/// down but multiplies up).
pub fn human(v_us: f64) -> String {
    let v_us = round3(v_us);
    let u = unit_for(v_us);
    format!("{} {}", sig3(v_us / u.us), u.name)
}

/// 3 significant digits, no trailing noise.
fn sig3(v: f64) -> String {
    if v == 0.0 {
        return "0".into();
    }
    let decimals = (2 - v.abs().log10().floor() as i32).clamp(0, 3) as usize;
    format!("{v:.decimals$}")
}

fn err(e: impl std::fmt::Debug) -> String {
    format!("{e:?}")
}

/// Draws a chart of `panels` and returns the SVG text.
///
/// # Errors
/// A drawing failure (described).
pub fn chart(title: &str, panels: &[Panel<'_>]) -> Result<String, String> {
    let panels: Vec<&Panel<'_>> = panels
        .iter()
        .filter(|p| p.series.iter().any(|d| !d.series.total.is_empty()))
        .collect();
    let n_series: usize = panels.iter().map(|p| p.series.len()).sum();
    if n_series > MAX_SERIES {
        return Err(format!(
            "{n_series} series in one chart (at most {MAX_SERIES})"
        ));
    }
    let panel_h = 440u32;
    let height = 50 + panel_h * panels.len().max(1) as u32;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (1200, height)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let root = root.titled(title, ("sans-serif", 24)).map_err(err)?;
        if panels.is_empty() {
            root.draw(&Text::new(
                "no data in the logs for this chart",
                (40, 40),
                ("sans-serif", 18).into_font(),
            ))
            .map_err(err)?;
        }
        let areas = root.split_evenly((panels.len().max(1), 1));
        let mut style_at = 0;
        for (panel, area) in panels.iter().zip(areas.iter()) {
            draw_panel(area, panel, style_at).map_err(err)?;
            style_at += panel.series.len();
        }
        root.present().map_err(err)?;
    }
    Ok(svg)
}

type Area<'b> = DrawingArea<SVGBackend<'b>, Shift>;
type DrawResult<T> = Result<T, DrawingAreaErrorKind<std::io::Error>>;

fn draw_panel(area: &Area<'_>, panel: &Panel<'_>, first_style: usize) -> DrawResult<()> {
    let live: Vec<(usize, &Drawn<'_>)> = panel
        .series
        .iter()
        .enumerate()
        .filter(|(_, d)| !d.series.total.is_empty())
        .map(|(i, d)| (first_style + i, d))
        .collect();
    let max_us = live
        .iter()
        .map(|(_, d)| d.series.total.max() as f64 / 1e3)
        .fold(0.0, f64::max);
    let min_us = live
        .iter()
        .map(|(_, d)| d.series.total.min().max(1) as f64 / 1e3)
        .fold(f64::INFINITY, f64::min);
    let unit = unit_for(max_us);
    let (lo, hi) = (
        (min_us / unit.us / 1.5).max(1e-4),
        (max_us / unit.us * 1.8).max(min_us / unit.us * 4.0),
    );
    let legend_h = 22 * live.len() as u32 + 10;
    let (top, legend) = area.split_vertically(area.dim_in_pixel().1 - legend_h);
    let (left, right) = top.split_horizontally(640);
    by_percentile(&left, panel, &live, unit, lo..hi)?;
    over_time(&right, &live, unit, lo..hi)?;
    for (row, (style, d)) in live.iter().enumerate() {
        let y = 8 + 22 * row as i32;
        let (color, dash) = look(*style);
        let line = vec![(20, y + 7), (70, y + 7)];
        match dash {
            None => legend.draw(&PathElement::new(line, color.stroke_width(3)))?,
            Some((len, gap)) => legend.draw(&DashedPathElement::new(
                line,
                len,
                gap,
                color.stroke_width(3),
            ))?,
        }
        let p = &d.series.pct;
        legend.draw(&Text::new(
            format!(
                "{} — p50 {} · p99 {} · p99.9 {} · max {} · {} samples",
                d.label,
                human(p.p50_us),
                human(p.p99_us),
                human(p.p999_us),
                human(p.max_us),
                p.count
            ),
            (80, y),
            ("sans-serif", 15).into_font(),
        ))?;
    }
    Ok(())
}

fn look(style: usize) -> (RGBColor, Option<(u32, u32)>) {
    (COLORS[style % COLORS.len()], DASHES[style % DASHES.len()])
}

/// Percentile axis: x = 1/(1−p), shown as percentiles.
fn by_percentile(
    area: &Area<'_>,
    panel: &Panel<'_>,
    live: &[(usize, &Drawn<'_>)],
    unit: Unit,
    ys: std::ops::Range<f64>,
) -> DrawResult<()> {
    let mut chart = ChartBuilder::on(area)
        .caption(
            format!("{} — latency by percentile", panel.title),
            ("sans-serif", 17),
        )
        .margin(10)
        .x_label_area_size(36)
        .y_label_area_size(64)
        .build_cartesian_2d((1.0f64..100_000f64).log_scale(), ys.log_scale())?;
    chart
        .configure_mesh()
        .x_desc("percentile")
        .y_desc(format!("latency ({})", unit.name))
        .x_label_formatter(&|x| {
            let p = 100.0 * (1.0 - 1.0 / x);
            let s = format!("{p:.4}");
            format!("{}%", s.trim_end_matches('0').trim_end_matches('.'))
        })
        .y_label_formatter(&|y| sig3(*y))
        .draw()?;
    for (k, (style, d)) in live.iter().enumerate() {
        let (color, dash) = look(*style);
        let h = &d.series.total;
        let pts: Vec<(f64, f64)> = h
            .iter_quantiles(5)
            .map(|v| {
                let q = v.quantile_iterated_to().min(0.99999);
                let val = h.highest_equivalent(v.value_iterated_to()).max(h.min());
                (1.0 / (1.0 - q), val as f64 / 1e3 / unit.us)
            })
            .collect();
        line(&mut chart, &pts, color, dash)?;
        let p = &d.series.pct;
        for (x, v, name) in [
            (2.0, p.p50_us, "p50"),
            (100.0, p.p99_us, "p99"),
            (1000.0, p.p999_us, "p99.9"),
        ] {
            if v <= 0.0 {
                continue;
            }
            let pt = (x, v / unit.us);
            chart.draw_series(std::iter::once(Circle::new(pt, 5, color.filled())))?;
            if live.len() > LABELLED {
                continue; // the legend carries the values
            }
            // Labels alternate above and below their mark, series by
            // series, so close curves do not write over each other.
            let dy = if k % 2 == 0 {
                -20 - 15 * (k as i32 / 2)
            } else {
                6 + 15 * (k as i32 / 2)
            };
            chart.draw_series(std::iter::once(
                EmptyElement::at(pt)
                    + Text::new(
                        format!("{name} {}", human(v)),
                        (8, dy),
                        ("sans-serif", 13).into_font().color(&color),
                    ),
            ))?;
        }
    }
    Ok(())
}

/// p99 per interval; a missing (or empty) interval breaks the line.
fn over_time(
    area: &Area<'_>,
    live: &[(usize, &Drawn<'_>)],
    unit: Unit,
    ys: std::ops::Range<f64>,
) -> DrawResult<()> {
    let t_max = live
        .iter()
        .flat_map(|(_, d)| d.series.intervals.iter().map(|p| p.t_s + p.length_s))
        .fold(1.0f64, f64::max);
    let mut chart = ChartBuilder::on(area)
        .caption("p99 per interval", ("sans-serif", 17))
        .margin(10)
        .x_label_area_size(36)
        .y_label_area_size(64)
        .build_cartesian_2d(0f64..t_max, ys.log_scale())?;
    chart
        .configure_mesh()
        .x_desc("seconds since start")
        .y_desc(format!("p99 ({})", unit.name))
        .y_label_formatter(&|y| sig3(*y))
        .draw()?;
    for (k, (style, d)) in live.iter().enumerate() {
        let (color, dash) = look(*style);
        for seg in segments(&d.series.intervals) {
            let pts: Vec<(f64, f64)> = seg
                .iter()
                .map(|p| (p.t_s + p.length_s / 2.0, p.p99_us / unit.us))
                .collect();
            line(&mut chart, &pts, color, dash)?;
            for (p, at) in seg.iter().zip(&pts) {
                if p.partial {
                    // The run's last, shorter interval: a hollow mark, named.
                    chart.draw_series(std::iter::once(
                        EmptyElement::at(*at) + Circle::new((0, 0), 5, color.stroke_width(2)),
                    ))?;
                    if k == 0 {
                        chart.draw_series(std::iter::once(
                            EmptyElement::at(*at)
                                + Text::new(
                                    format!("○ partial {:.2}s", p.length_s),
                                    (-100, 10),
                                    ("sans-serif", 12).into_font(),
                                ),
                        ))?;
                    }
                } else {
                    chart.draw_series(std::iter::once(Circle::new(*at, 3, color.filled())))?;
                }
            }
        }
    }
    Ok(())
}

/// Runs of adjacent intervals: a new run starts where an interval is
/// missing (the next one starts later than this one ends) or empty.
pub fn segments(points: &[Point]) -> Vec<&[Point]> {
    let mut out = Vec::new();
    let mut start = 0;
    for i in 0..points.len() {
        let broken = points[i].count == 0
            || (i > start && points[i].t_s > points[i - 1].t_s + points[i - 1].length_s + 1e-3);
        if broken {
            if i > start {
                out.push(&points[start..i]);
            }
            start = if points[i].count == 0 { i + 1 } else { i };
        }
    }
    if start < points.len() {
        out.push(&points[start..]);
    }
    out
}

fn line<X, Y>(
    chart: &mut ChartContext<'_, SVGBackend<'_>, Cartesian2d<X, Y>>,
    pts: &[(f64, f64)],
    color: RGBColor,
    dash: Option<(u32, u32)>,
) -> DrawResult<()>
where
    X: plotters::coord::ranged1d::Ranged<ValueType = f64>,
    Y: plotters::coord::ranged1d::Ranged<ValueType = f64>,
{
    let style = color.stroke_width(2);
    match dash {
        None => {
            chart.draw_series(LineSeries::new(pts.iter().copied(), style))?;
        }
        Some((len, gap)) => {
            chart.draw_series(DashedLineSeries::new(pts.iter().copied(), len, gap, style))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(t: f64, count: u64) -> Point {
        Point {
            t_s: t,
            length_s: 1.0,
            partial: false,
            count,
            p50_us: 1.0,
            p99_us: 2.0,
            p999_us: 2.0,
            max_us: 3.0,
        }
    }

    #[test]
    fn a_missing_or_empty_interval_breaks_the_line() {
        let pts = [
            p(0.0, 1),
            p(1.0, 1),
            p(3.0, 1),
            p(4.0, 0),
            p(5.0, 2),
            p(6.0, 2),
        ];
        let segs: Vec<Vec<f64>> = segments(&pts)
            .iter()
            .map(|s| s.iter().map(|p| p.t_s).collect())
            .collect();
        assert_eq!(segs, vec![vec![0.0, 1.0], vec![3.0], vec![5.0, 6.0]]);
    }

    #[test]
    fn units_follow_the_range_and_values_read_at_a_glance() {
        assert_eq!(unit_for(950.0).name, "µs");
        assert_eq!(unit_for(12_000.0).name, "ms");
        assert_eq!(unit_for(3_000_000.0).name, "s");
        assert_eq!(human(45.61), "45.6 µs");
        assert_eq!(human(1_234.0), "1.23 ms");
        assert_eq!(human(2_050_000.0), "2.05 s");
        assert_eq!(human(0.512), "0.512 µs");
        // Halfway values round as summary.json rounds them.
        for ns in [1_065u32, 2_005, 10_125, 999_500, 1_065_000] {
            let v = f64::from(ns) / 1e3;
            let shown = human(v);
            let (n, unit) = shown.split_once(' ').unwrap();
            let scale = match unit {
                "µs" => 1.0,
                "ms" => 1e3,
                _ => 1e6,
            };
            let back: f64 = n.parse::<f64>().unwrap() * scale;
            assert!(
                (back - round3(v)).abs() < 1e-9 * scale,
                "{v} shows {shown}, JSON {}",
                round3(v)
            );
        }
    }

    #[test]
    fn styles_never_repeat_within_a_chart() {
        let looks: Vec<_> = (0..MAX_SERIES).map(look).collect();
        for i in 0..looks.len() {
            for j in 0..i {
                assert_ne!(looks[i].0, looks[j].0, "colour {i} = {j}");
                assert_ne!(looks[i].1, looks[j].1, "line style {i} = {j}");
            }
        }
    }
}
