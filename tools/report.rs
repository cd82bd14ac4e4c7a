//! `tickfan report DIR`: reads the HdrHistogram interval logs (`*.hlog`)
//! that the engine (`serve --log-dir`, `demo`) and the tools (`subscribe`,
//! `replay --log-dir`) wrote into `DIR`, prints the tick path's headline
//! and a percentile table per series, and writes beside them:
//!
//! | file | what |
//! |---|---|
//! | `tick-path.svg` | freshness, subscribers' and engine end-to-end latency; slow subscribers in their own panel |
//! | `order-path.svg` | order acceptance (queue wait) and completion (end to end), per lane |
//! | `engine-stages.svg` | the engine's tick stages one by one |
//! | `report.html` | one self-contained page: the charts, the percentile table, the run's counts |
//! | `summary.json` | the table and the per-interval points (schema in the README) |
//! | `SOURCE.TAG.hgrm` | each series as a percentile distribution in the Java `outputPercentileDistribution` format (values in µs) |
//!
//! A series is one tag of one file (`engine/engine_e2e`, `subscribers/e2e_normal`).
//! The logs are read with the standard interval-log parser, so a log written
//! by any HdrHistogram implementation works too (an untagged line becomes
//! tag `default`). An interval shorter than the series' full interval
//! length is the run's partial last one and is marked `partial`.
//!
//! **The tick path leads with freshness.** A series tagged `freshness_<class>`
//! (`freshness.hlog`, written by `subscribe --sent` and `demo`) is, per
//! sent tick, the time until a reader of that class holds the symbol at
//! that tick or newer; `subscribers/e2e_<class>` is latency over the
//! messages delivered only, which a conflating server's superseded ticks
//! never enter. The table, the charts, the page and `summary.json`
//! (`tick_path`) put freshness first, beside the delivered latency, each
//! with the sentence [`FRESHNESS_MEANS`] / [`LATENCY_MEANS`]. Logs without
//! freshness series (older runs, `subscribe` without `--sent`) render as
//! before, with a note that freshness is missing.

use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine as _;
use clap::Args;
use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};
use hdrhistogram::serialization::Deserializer;
use hdrhistogram::Histogram;

use tickfan::metrics::hlog::EXTENSION;
use tickfan::metrics::report::{serialize_round3, Percentiles};
use tickfan::metrics::Stage;

use super::freshness::TAG_PREFIX as FRESHNESS_TAG;
use super::report_charts::{chart, human, Drawn, Panel};
use super::report_html;
use tickfan::error::Failure;

/// `schema` of `summary.json`; bumped when a field changes meaning or goes away.
pub const SUMMARY_SCHEMA: &str = "tickfan-report/2";

/// What freshness is, in one sentence (printed, on the page, in the JSON).
pub const FRESHNESS_MEANS: &str = "freshness: for every tick sent, the time from its intended send time until the reader holds that symbol at that tick or newer, superseded (conflated) ticks included: what a reader actually waits for";

/// What delivered latency is, in one sentence.
pub const LATENCY_MEANS: &str = "delivered latency: intended send time to receipt, over the messages delivered only: a superseded tick never shows in it, so it hides staleness";

/// Said when the logs hold latency but no freshness series.
pub const NO_FRESHNESS: &str = "no freshness series in these logs (freshness.hlog: written by demo, and by subscribe --sent with --log-dir); delivered latency alone hides superseded ticks";

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
    /// Interval start, seconds since the earliest log's start (ms precision).
    #[serde(serialize_with = "ms")]
    pub t_s: f64,
    /// Interval length, seconds (ms precision).
    #[serde(serialize_with = "ms")]
    pub length_s: f64,
    /// Shorter than the series' full interval: the run's last, cut short.
    pub partial: bool,
    /// Values in the interval.
    pub count: u64,
    /// Median, µs.
    #[serde(serialize_with = "serialize_round3")]
    pub p50_us: f64,
    /// 99th percentile, µs.
    #[serde(serialize_with = "serialize_round3")]
    pub p99_us: f64,
    /// 99.9th percentile, µs.
    #[serde(serialize_with = "serialize_round3")]
    pub p999_us: f64,
    /// Largest, µs.
    #[serde(serialize_with = "serialize_round3")]
    pub max_us: f64,
}

/// Seconds to the millisecond.
fn ms<S: serde::Serializer>(x: &f64, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64((x * 1e3).round() / 1e3)
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
    /// Per interval: absolute start s, length s, its histogram.
    points: Vec<(f64, f64, Histogram<u64>)>,
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
                        r.points.push((t, i.duration().as_secs_f64(), h));
                    }
                }
            }
        }
    }
    // The tick path's headline first (freshness, then delivered latency),
    // then per file; engine stages in pipeline order, other tags by name.
    let rank = |tag: &str| {
        Stage::ALL
            .iter()
            .position(|s| s.as_str() == tag)
            .unwrap_or(usize::MAX)
    };
    let key = |r: &Raw| {
        let group = if r.tag.starts_with(FRESHNESS_TAG) {
            0
        } else if r.source == "subscribers" && r.tag.starts_with("e2e_") {
            1
        } else {
            2
        };
        (group, r.file, rank(&r.tag), r.tag.clone())
    };
    raws.sort_by_key(key);
    Ok(raws
        .into_iter()
        .map(|r| {
            let full = r.points.iter().map(|p| p.1).fold(0.0, f64::max);
            let intervals = r
                .points
                .iter()
                .map(|(t, length_s, h)| Point {
                    t_s: t - earliest,
                    length_s: *length_s,
                    partial: *length_s + 0.0005 < full,
                    count: h.len(),
                    p50_us: us(h.value_at_quantile(0.5)),
                    p99_us: us(h.value_at_quantile(0.99)),
                    p999_us: us(h.value_at_quantile(0.999)),
                    max_us: us(h.max()),
                })
                .collect();
            (r, intervals)
        })
        .map(|(r, intervals)| Series {
            pct: Percentiles::of(&r.total),
            intervals,
            source: r.source,
            tag: r.tag,
            total: r.total,
        })
        .collect())
}

/// One reader class on the tick path: what it waited for, what was delivered.
#[derive(Debug, Clone, serde::Serialize)]
pub struct TickClass {
    /// `normal`, `slow`, …
    pub class: String,
    /// Freshness over every sent tick (`freshness_<class>`), if logged.
    pub freshness: Option<Percentiles>,
    /// Latency over the messages delivered (`subscribers/e2e_<class>`), if logged.
    pub delivered_latency: Option<Percentiles>,
}

/// The tick path's headline: per class, freshness beside delivered latency.
#[derive(Debug, Clone, serde::Serialize)]
pub struct TickPath {
    /// [`FRESHNESS_MEANS`].
    pub freshness_means: &'static str,
    /// [`LATENCY_MEANS`].
    pub delivered_latency_means: &'static str,
    /// Normal first, then slow, then any other class; empty without subscriber logs.
    pub classes: Vec<TickClass>,
}

/// The tick path's classes found in `series`.
pub fn tick_path(series: &[Series]) -> TickPath {
    let mut names: Vec<&str> = series
        .iter()
        .filter_map(|s| {
            s.tag.strip_prefix(FRESHNESS_TAG).or_else(|| {
                (s.source == "subscribers")
                    .then(|| s.tag.strip_prefix("e2e_"))
                    .flatten()
            })
        })
        .collect();
    let order = |c: &str| match c {
        "normal" => 0,
        "slow" => 1,
        _ => 2,
    };
    names.sort_by_key(|c| (order(c), c.to_string()));
    names.dedup();
    let find = |pred: &dyn Fn(&Series) -> bool| {
        series
            .iter()
            .find(|s| pred(s) && s.pct.count > 0)
            .map(|s| s.pct)
    };
    TickPath {
        freshness_means: FRESHNESS_MEANS,
        delivered_latency_means: LATENCY_MEANS,
        classes: names
            .into_iter()
            .map(|c| TickClass {
                class: c.to_string(),
                freshness: find(&|s| s.tag.strip_prefix(FRESHNESS_TAG) == Some(c)),
                delivered_latency: find(&|s| {
                    s.source == "subscribers" && s.tag.strip_prefix("e2e_") == Some(c)
                }),
            })
            .collect(),
    }
}

/// The tick path's headline as printed: per class, freshness then
/// delivered latency (p50, p99, p99.9, max), and what each means. Empty
/// when the logs hold no subscriber series.
pub fn headline(series: &[Series]) -> String {
    let tp = tick_path(series);
    if tp.classes.is_empty() {
        return String::new();
    }
    let mut s = format!(
        "tick path, per reader class:\n  {:<7} {:<18} {:>11} {:>10} {:>10} {:>10} {:>10}\n",
        "class", "", "count", "p50", "p99", "p99.9", "max"
    );
    let mut any_freshness = false;
    for c in &tp.classes {
        for (what, p) in [
            ("freshness", &c.freshness),
            ("delivered latency", &c.delivered_latency),
        ] {
            let Some(p) = p else { continue };
            any_freshness |= what == "freshness";
            s.push_str(&format!(
                "  {:<7} {:<18} {:>11} {:>10} {:>10} {:>10} {:>10}\n",
                c.class,
                what,
                p.count,
                human(p.p50_us),
                human(p.p99_us),
                human(p.p999_us),
                human(p.max_us)
            ));
        }
    }
    if any_freshness {
        s.push_str(&format!("  {FRESHNESS_MEANS}.\n"));
    } else {
        s.push_str(&format!("  {NO_FRESHNESS}.\n"));
    }
    s.push_str(&format!("  {LATENCY_MEANS}.\n"));
    s
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

/// The tick-path chart: freshness first, then end to end as subscribers
/// and the engine see it; the slow subscribers apart (their seconds would
/// squash the rest).
fn tick_panels(series: &[Series]) -> Vec<Panel<'_>> {
    vec![
        panel(
            series,
            "Tick path: end to end",
            &[
                (
                    "freshness",
                    "freshness_normal",
                    "freshness (sent tick → reader holds it or newer)",
                ),
                (
                    "subscribers",
                    "e2e_normal",
                    "delivered latency (send → received)",
                ),
                ("engine", "engine_e2e", "engine (received → written)"),
            ],
        ),
        panel(
            series,
            "Slow subscribers",
            &[
                (
                    "freshness",
                    "freshness_slow",
                    "slow: freshness (sent tick → reader holds it or newer)",
                ),
                (
                    "subscribers",
                    "e2e_slow",
                    "slow: delivered latency (send → received)",
                ),
            ],
        ),
    ]
}

/// The order-path chart: acceptance and completion, per lane.
fn order_panels(series: &[Series]) -> Vec<Panel<'_>> {
    vec![
        panel(
            series,
            "Order acceptance (accepted → taken by a worker)",
            &[
                ("engine", "order_queue_wait_small", "small lane"),
                ("engine", "order_queue_wait_large", "large lane"),
                ("engine", "order_reject", "rejected (received → REJECT)"),
            ],
        ),
        panel(
            series,
            "Order completion (received → terminal reply)",
            &[
                ("engine", "order_e2e_small", "small lane"),
                ("engine", "order_e2e_large", "large lane"),
            ],
        ),
    ]
}

/// The engine's tick stages, one by one.
fn stage_panels(series: &[Series]) -> Vec<Panel<'_>> {
    vec![panel(
        series,
        "Engine tick stages",
        &[
            ("engine", "feed_parse", "feed parse"),
            ("engine", "slot_wait", "slot wait"),
            ("engine", "publish", "publish (fan-out)"),
            ("engine", "socket_write", "socket write"),
            ("engine", "engine_e2e", "engine end to end"),
        ],
    )]
}

fn panel<'a>(series: &'a [Series], title: &str, want: &[(&str, &str, &str)]) -> Panel<'a> {
    Panel {
        title: title.to_string(),
        series: want
            .iter()
            .filter_map(|(source, tag, label)| {
                series
                    .iter()
                    .find(|s| s.source == *source && s.tag == *tag)
                    .map(|s| Drawn {
                        label: label.to_string(),
                        series: s,
                    })
            })
            .collect(),
    }
}

/// The charts `report` draws: file name, title, SVG.
pub fn charts(series: &[Series]) -> Result<Vec<(&'static str, &'static str, String)>, String> {
    Ok(vec![
        (
            "tick-path.svg",
            "Tick path",
            chart("Tick path latency", &tick_panels(series))?,
        ),
        (
            "order-path.svg",
            "Order path",
            chart("Order path latency", &order_panels(series))?,
        ),
        (
            "engine-stages.svg",
            "Engine stages",
            chart("Engine tick stages", &stage_panels(series))?,
        ),
    ])
}

/// `summary.json`: every series with its percentiles and intervals.
pub fn summary(
    dir: &Path,
    series: &[Series],
    run: Option<&serde_json::Value>,
) -> serde_json::Value {
    serde_json::json!({
        "schema": SUMMARY_SCHEMA,
        "units": { "latency": "µs (fields ending _us)", "time": "s (fields ending _s)" },
        "source_dir": dir,
        "tick_path": tick_path(series),
        "series": series,
        "run": run,
    })
}

/// The engine's final report beside the logs (`final-report.json`, written by
/// `serve --log-dir` and `demo`), if any: the run's counts.
fn final_report(dir: &Path) -> Option<serde_json::Value> {
    let text = std::fs::read_to_string(dir.join("final-report.json")).ok()?;
    serde_json::from_str(&text).ok()
}

/// Loads `dir`, writes the charts, the page, the JSON and the `.hgrm` files into `out`.
///
/// # Errors
/// See [`load`]; a file that cannot be written.
pub fn render(dir: &Path, out: &Path) -> Result<Rendered, Failure> {
    let series = load(dir)?;
    std::fs::create_dir_all(out).map_err(|e| runtime("cannot create", out, e))?;
    let mut files = Vec::new();
    let mut write = |name: &str, bytes: &[u8]| -> Result<(), Failure> {
        let p = out.join(name);
        std::fs::write(&p, bytes).map_err(|e| runtime("cannot write", &p, e))?;
        files.push(p);
        Ok(())
    };
    for s in &series {
        write(
            &format!("{}.{}.hgrm", s.source, s.tag),
            hgrm(&s.total).as_bytes(),
        )?;
    }
    let charts = charts(&series).map_err(|e| Failure::Runtime(format!("cannot draw: {e}")))?;
    for (name, _, svg) in &charts {
        write(name, svg.as_bytes())?;
    }
    let run = final_report(dir);
    let json = summary(dir, &series, run.as_ref());
    write(
        "summary.json",
        serde_json::to_string_pretty(&json)
            .expect("serialises")
            .as_bytes(),
    )?;
    let page = report_html::page(dir, &series, &charts, run.as_ref());
    write("report.html", page.as_bytes())?;
    Ok(Rendered { series, files })
}

/// Runs the subcommand.
pub fn run(args: &ReportArgs) -> Result<(), Failure> {
    let out = args.out.clone().unwrap_or_else(|| args.dir.clone());
    let r = render(&args.dir, &out)?;
    print!("{}", headline(&r.series));
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
