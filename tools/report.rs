//! `tickfan report DIR`: reads the HdrHistogram interval logs (`*.hlog`)
//! that the engine (`serve --log-dir`, `demo`) and the tools (`subscribe`,
//! `replay --log-dir`) wrote into `DIR`, prints a percentile table per
//! series, and writes beside them:
//!
//! | file | what |
//! |---|---|
//! | `percentiles.svg` | percentile distribution of every series (x: percentile on a 1/(1−p) log axis, y: µs, log) |
//! | `latency-over-time.svg` | p99 of every series per interval (x: seconds since the earliest log started) |
//! | `summary.json` | the table and the per-interval points |
//! | `SOURCE.TAG.hgrm` | each series as a percentile distribution in the Java `outputPercentileDistribution` format (values in µs) |
//!
//! A series is one tag of one file (`engine/engine_e2e`, `subscribers/e2e_normal`).
//! The logs are read with the standard interval-log parser, so a log written
//! by any HdrHistogram implementation works too (an untagged line becomes
//! tag `default`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine as _;
use clap::Args;
use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};
use hdrhistogram::serialization::Deserializer;
use hdrhistogram::Histogram;
use plotters::prelude::*;

use tickfan::metrics::hlog::EXTENSION;
use tickfan::metrics::report::Percentiles;
use tickfan::metrics::Stage;

use crate::Failure;

/// Flags of `tickfan report`.
#[derive(Debug, Clone, Args)]
pub struct ReportArgs {
    /// Directory holding `*.hlog` files.
    pub dir: PathBuf,
    /// Write the plots, the JSON and the `.hgrm` files here instead of DIR.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

/// One interval of one series.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Point {
    /// Interval start, seconds since the earliest log's start.
    pub t_s: f64,
    /// Interval length, seconds.
    pub length_s: f64,
    /// Values in the interval.
    pub count: u64,
    /// Median, µs.
    pub p50_us: f64,
    /// 99th percentile, µs.
    pub p99_us: f64,
    /// Largest, µs.
    pub max_us: f64,
}

/// One tag of one log file.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Series {
    /// The file's stem (`engine`, `subscribers`, `replay`).
    pub source: String,
    /// The tag (a stage name, `e2e_normal`, …).
    pub tag: String,
    /// Percentiles over the whole log.
    #[serde(flatten)]
    pub pct: Percentiles,
    /// Per interval.
    pub intervals: Vec<Point>,
    /// Merged histogram (ns).
    #[serde(skip)]
    pub total: Histogram<u64>,
}

impl Series {
    /// `source/tag`.
    pub fn name(&self) -> String {
        format!("{}/{}", self.source, self.tag)
    }
}

/// What `report` found and wrote.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Rendered {
    /// Every series, in file then first-appearance order.
    pub series: Vec<Series>,
    /// Files written.
    pub files: Vec<PathBuf>,
}

fn us(ns: u64) -> f64 {
    ns as f64 / 1e3
}

fn runtime(what: &str, path: &Path, e: impl std::fmt::Display) -> Failure {
    Failure::Runtime(format!("{what} {}: {e}", path.display()))
}

/// A series under construction: wall-clock start of its log, intervals.
struct Raw {
    file: usize,
    source: String,
    tag: String,
    total: Histogram<u64>,
    /// (absolute start s, length s, histogram summary)
    points: Vec<(f64, f64, u64, f64, f64, f64)>,
}

/// Reads every `*.hlog` in `dir`.
///
/// # Errors
/// A missing directory (usage), no log in it (usage), an unreadable or
/// malformed file (runtime, naming the file and the offset).
pub fn load(dir: &Path) -> Result<Vec<Series>, Failure> {
    let entries = std::fs::read_dir(dir)
        .map_err(|e| Failure::Usage(format!("cannot read directory {}: {e}", dir.display())))?;
    let mut files: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == EXTENSION))
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(Failure::Usage(format!(
            "no *.{EXTENSION} histogram logs in {}",
            dir.display()
        )));
    }
    let mut raws: Vec<Raw> = Vec::new();
    let mut earliest = f64::INFINITY;
    for (file, path) in files.iter().enumerate() {
        let bytes = std::fs::read(path).map_err(|e| runtime("cannot read", path, e))?;
        let source = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let (mut start, mut base) = (None::<Duration>, None::<Duration>);
        for entry in IntervalLogIterator::new(&bytes) {
            let entry =
                entry.map_err(|e| runtime("malformed histogram log", path, format!("{e:?}")))?;
            match entry {
                LogEntry::StartTime(t) => start = Some(t),
                LogEntry::BaseTime(t) => base = Some(t),
                LogEntry::Interval(i) => {
                    let raw = base64::engine::general_purpose::STANDARD
                        .decode(i.encoded_histogram())
                        .map_err(|e| runtime("bad histogram encoding in", path, e))?;
                    let h: Histogram<u64> = Deserializer::new()
                        .deserialize(&mut raw.as_slice())
                        .map_err(|e| runtime("bad histogram in", path, format!("{e:?}")))?;
                    // Absolute time: BaseTime + offset; without BaseTime the
                    // timestamps are absolute already.
                    let t =
                        base.unwrap_or_default().as_secs_f64() + i.start_timestamp().as_secs_f64();
                    let st = start.or(base).map(|s| s.as_secs_f64()).unwrap_or(t);
                    earliest = earliest.min(st).min(t);
                    let tag = i
                        .tag()
                        .map(|t| t.as_str().to_string())
                        .unwrap_or_else(|| "default".into());
                    let idx = match raws.iter().position(|r| r.source == source && r.tag == tag) {
                        Some(k) => k,
                        None => {
                            raws.push(Raw {
                                file,
                                source: source.clone(),
                                tag,
                                total: Histogram::new_with_bounds(1, 600_000_000_000, 3)
                                    .expect("static bounds"),
                                points: Vec::new(),
                            });
                            raws.len() - 1
                        }
                    };
                    let r = &mut raws[idx];
                    r.total.add(&h).map_err(|e| {
                        runtime("histogram out of range in", path, format!("{e:?}"))
                    })?;
                    if !h.is_empty() {
                        r.points.push((
                            t,
                            i.duration().as_secs_f64(),
                            h.len(),
                            us(h.value_at_quantile(0.5)),
                            us(h.value_at_quantile(0.99)),
                            us(h.max()),
                        ));
                    }
                }
            }
        }
    }
    // Per file; engine stages in pipeline order, other tags by name.
    let rank = |tag: &str| {
        Stage::ALL
            .iter()
            .position(|s| s.as_str() == tag)
            .unwrap_or(usize::MAX)
    };
    raws.sort_by(|a, b| (a.file, rank(&a.tag), &a.tag).cmp(&(b.file, rank(&b.tag), &b.tag)));
    Ok(raws
        .into_iter()
        .map(|r| Series {
            pct: Percentiles::of(&r.total),
            intervals: r
                .points
                .iter()
                .map(|&(t, length_s, count, p50_us, p99_us, max_us)| Point {
                    t_s: t - earliest,
                    length_s,
                    count,
                    p50_us,
                    p99_us,
                    max_us,
                })
                .collect(),
            source: r.source,
            tag: r.tag,
            total: r.total,
        })
        .collect())
}

/// The percentile table.
pub fn table(series: &[Series]) -> String {
    let mut s = format!(
        "{:<28} {:>11} {:>10} {:>10} {:>10} {:>10} {:>10}\n",
        "series (µs)", "count", "p50", "p90", "p99", "p99.9", "max"
    );
    for x in series {
        s.push_str(&format!(
            "{:<28} {:>11} {:>10.1} {:>10.1} {:>10.1} {:>10.1} {:>10.1}\n",
            x.name(),
            x.pct.count,
            x.pct.p50_us,
            x.pct.p90_us,
            x.pct.p99_us,
            x.pct.p999_us,
            x.pct.max_us
        ));
    }
    s
}

/// Loads `dir`, writes the plots, the JSON and the `.hgrm` files into `out`.
///
/// # Errors
/// See [`load`]; a file that cannot be written.
pub fn render(dir: &Path, out: &Path) -> Result<Rendered, Failure> {
    let series = load(dir)?;
    std::fs::create_dir_all(out).map_err(|e| runtime("cannot create", out, e))?;
    let mut files = Vec::new();
    for s in &series {
        let p = out.join(format!("{}.{}.hgrm", s.source, s.tag));
        std::fs::write(&p, hgrm(&s.total)).map_err(|e| runtime("cannot write", &p, e))?;
        files.push(p);
    }
    let p = out.join("percentiles.svg");
    plot_percentiles(&series, &p)?;
    files.push(p);
    let p = out.join("latency-over-time.svg");
    plot_over_time(&series, &p)?;
    files.push(p);
    let p = out.join("summary.json");
    let json = serde_json::json!({ "source_dir": dir, "series": &series });
    std::fs::write(&p, serde_json::to_string_pretty(&json).expect("serialises"))
        .map_err(|e| runtime("cannot write", &p, e))?;
    files.push(p);
    Ok(Rendered { series, files })
}

/// Runs the subcommand.
pub fn run(args: &ReportArgs) -> Result<(), Failure> {
    let out = args.out.clone().unwrap_or_else(|| args.dir.clone());
    let r = render(&args.dir, &out)?;
    print!("{}", table(&r.series));
    println!("report files in {}:", out.display());
    for f in &r.files {
        println!("  {}", f.display());
    }
    Ok(())
}

/// A histogram as the Java `outputPercentileDistribution` text (µs, five
/// ticks per half-distance), which HdrHistogram's plotters read.
pub fn hgrm(h: &Histogram<u64>) -> String {
    let mut s = format!(
        "{:>12} {:>14} {:>10} {:>14}\n\n",
        "Value", "Percentile", "TotalCount", "1/(1-Percentile)"
    );
    if !h.is_empty() {
        let mut total = 0u64;
        for v in h.iter_quantiles(5) {
            let value = h.highest_equivalent(v.value_iterated_to()) as f64 / 1e3;
            let q = v.quantile_iterated_to();
            total += v.count_since_last_iteration();
            if q < 1.0 {
                s.push_str(&format!(
                    "{value:12.3} {q:2.12} {total:10} {:14.2}\n",
                    1.0 / (1.0 - q)
                ));
            } else {
                s.push_str(&format!("{value:12.3} {q:2.12} {total:10}\n"));
            }
        }
    }
    let (mean, sd, max) = if h.is_empty() {
        (0.0, 0.0, 0.0)
    } else {
        (h.mean() / 1e3, h.stdev() / 1e3, h.max() as f64 / 1e3)
    };
    s.push_str(&format!(
        "#[Mean    = {mean:12.3}, StdDeviation   = {sd:12.3}]\n#[Max     = {max:12.3}, Total count    = {:12}]\n#[Buckets = {:12}, SubBuckets     = {:12}]\n",
        h.len(),
        h.buckets(),
        2048
    ));
    s
}

const COLORS: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

fn plot_err(path: &Path, e: impl std::fmt::Debug) -> Failure {
    Failure::Runtime(format!("cannot draw {}: {e:?}", path.display()))
}

/// The key beside a chart: one coloured line and name per series, in the
/// order (and colours) the series are drawn.
fn legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    names: &[String],
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    for (i, name) in names.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let y = 60 + 24 * i as i32;
        area.draw(&PathElement::new(
            vec![(10, y), (34, y)],
            color.stroke_width(3),
        ))?;
        area.draw(&Text::new(
            name.clone(),
            (42, y - 7),
            ("sans-serif", 14).into_font(),
        ))?;
    }
    Ok(())
}

/// y range (µs, log axis) covering `values`.
fn y_range(values: impl Iterator<Item = f64>) -> std::ops::Range<f64> {
    let (mut lo, mut hi) = (f64::INFINITY, 0f64);
    for v in values.filter(|v| *v > 0.0) {
        lo = lo.min(v);
        hi = hi.max(v);
    }
    if !lo.is_finite() {
        return 0.1..10.0;
    }
    (lo / 2.0).max(0.001)..(hi * 2.0).max(lo * 4.0)
}

/// Percentile distribution: x = 1/(1−p) (log), labelled as percentiles.
fn plot_percentiles(series: &[Series], path: &Path) -> Result<(), Failure> {
    let curves: Vec<(String, Vec<(f64, f64)>)> = series
        .iter()
        .filter(|s| !s.total.is_empty())
        .map(|s| {
            let pts = s
                .total
                .iter_quantiles(5)
                .map(|v| {
                    let q = v.quantile_iterated_to().min(0.999_999);
                    let v = s.total.highest_equivalent(v.value_iterated_to());
                    (1.0 / (1.0 - q), us(v.max(s.total.min())))
                })
                .collect();
            (s.name(), pts)
        })
        .collect();
    let ys = y_range(curves.iter().flat_map(|c| c.1.iter().map(|p| p.1)));
    let root = SVGBackend::new(path, (1100, 600)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| plot_err(path, e))?;
    let (plot, key) = root.split_horizontally(850);
    let names: Vec<String> = curves.iter().map(|c| c.0.clone()).collect();
    legend(&key, &names).map_err(|e| plot_err(path, e))?;
    let mut chart = ChartBuilder::on(&plot)
        .caption("Latency by percentile", ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d((1.0f64..1_000_000f64).log_scale(), ys.log_scale())
        .map_err(|e| plot_err(path, e))?;
    chart
        .configure_mesh()
        .x_desc("percentile")
        .y_desc("latency (µs)")
        .x_label_formatter(&|x| {
            let p = 100.0 * (1.0 - 1.0 / x);
            if p < 99.0 {
                format!("{p:.0}%")
            } else {
                let s = format!("{p:.4}");
                format!("{}%", s.trim_end_matches('0').trim_end_matches('.'))
            }
        })
        .y_label_formatter(&|y| format!("{y}"))
        .draw()
        .map_err(|e| plot_err(path, e))?;
    for (i, (_, pts)) in curves.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        chart
            .draw_series(LineSeries::new(pts.iter().copied(), color.stroke_width(2)))
            .map_err(|e| plot_err(path, e))?;
    }
    root.present().map_err(|e| plot_err(path, e))
}

/// p99 per interval over time.
fn plot_over_time(series: &[Series], path: &Path) -> Result<(), Failure> {
    let live: Vec<&Series> = series.iter().filter(|s| !s.intervals.is_empty()).collect();
    let t_max = live
        .iter()
        .flat_map(|s| s.intervals.iter().map(|p| p.t_s + p.length_s))
        .fold(1.0f64, f64::max);
    let ys = y_range(
        live.iter()
            .flat_map(|s| s.intervals.iter().map(|p| p.p99_us)),
    );
    let root = SVGBackend::new(path, (1100, 600)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| plot_err(path, e))?;
    let (plot, key) = root.split_horizontally(850);
    let names: Vec<String> = live.iter().map(|s| s.name()).collect();
    legend(&key, &names).map_err(|e| plot_err(path, e))?;
    let mut chart = ChartBuilder::on(&plot)
        .caption("p99 latency per interval", ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(0f64..t_max, ys.log_scale())
        .map_err(|e| plot_err(path, e))?;
    chart
        .configure_mesh()
        .x_desc("seconds since start")
        .y_desc("p99 latency (µs)")
        .y_label_formatter(&|y| format!("{y}"))
        .draw()
        .map_err(|e| plot_err(path, e))?;
    for (i, s) in live.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let pts: Vec<(f64, f64)> = s
            .intervals
            .iter()
            .map(|p| (p.t_s + p.length_s, p.p99_us.max(0.001)))
            .collect();
        chart
            .draw_series(LineSeries::new(pts.iter().copied(), color.stroke_width(2)))
            .map_err(|e| plot_err(path, e))?;
        chart
            .draw_series(pts.iter().map(|&p| Circle::new(p, 3, color.filled())))
            .map_err(|e| plot_err(path, e))?;
    }
    root.present().map_err(|e| plot_err(path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hgrm_has_the_java_layout() {
        let mut h = Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3).unwrap();
        for v in 1..=1000u64 {
            h.record(v * 1000).unwrap();
        }
        let text = hgrm(&h);
        let mut lines = text.lines();
        assert!(lines.next().unwrap().contains("1/(1-Percentile)"));
        assert_eq!(lines.next(), Some(""));
        let first: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
        assert_eq!(first[0], "1.000");
        assert!(
            text.contains("#[Max     =     1000.447, Total count    =         1000]"),
            "{text}"
        );
    }
}
