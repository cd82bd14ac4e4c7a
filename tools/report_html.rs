//! `report.html`: one self-contained page (inline CSS, the charts as inline
//! SVG, no script, no external resource) that a trader opens from a mail or
//! a shared folder: the tick path's headline (per reader class, freshness
//! beside delivered latency, each with the sentence saying what it is), the
//! charts, the percentile table (each value in its own unit) and the run's
//! counts.
//!
//! Every value is in the HTML text itself; nothing is computed by a script,
//! so what a browser shows is what this file says. Each latency cell also
//! carries its value in µs (`data-us`, as in `summary.json`).

use std::fmt::Write as _;
use std::path::Path;

use super::report::{tick_path, Series, NO_FRESHNESS};
use super::report_charts::human;
use tickfan::metrics::report::Percentiles;

const STYLE: &str = "
body { font-family: system-ui, -apple-system, 'Segoe UI', sans-serif; margin: 24px auto; max-width: 1240px; color: #222; }
h1 { font-size: 26px; margin-bottom: 4px; }
h2 { font-size: 20px; margin-top: 32px; border-bottom: 1px solid #ddd; padding-bottom: 4px; }
p.meta { color: #666; margin-top: 0; }
table { border-collapse: collapse; margin: 8px 0 16px; font-size: 14px; }
th, td { padding: 4px 10px; border-bottom: 1px solid #eee; text-align: right; }
th { background: #f4f6f8; }
td.name, th.name { text-align: left; }
td.p99 { font-weight: 600; }
tr.freshness td { background: #fff8e6; }
p.means { margin: 4px 0; max-width: 60em; }
figure { margin: 12px 0 24px; }
figure svg { max-width: 100%; height: auto; border: 1px solid #eee; }
";

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The page.
pub fn page(
    dir: &Path,
    series: &[Series],
    charts: &[(&'static str, &'static str, String)],
    run: Option<&serde_json::Value>,
) -> String {
    let span = series
        .iter()
        .flat_map(|s| s.intervals.iter().map(|p| p.t_s + p.length_s))
        .fold(0.0f64, f64::max);
    let mut h = String::with_capacity(256 * 1024);
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <title>tickfan report</title><style>{STYLE}</style></head><body>\n\
         <h1>tickfan latency report</h1>\n<p class=\"meta\">from {} · {} series · {:.1} s of intervals</p>\n",
        esc(&dir.display().to_string()),
        series.len(),
        span
    );
    h.push_str(&tick_section(series));
    h.push_str("<h2>Percentiles</h2>\n");
    h.push_str(&table(series));
    for (name, title, svg) in charts {
        let _ = write!(
            h,
            "<h2>{}</h2>\n<figure id=\"{}\">{}</figure>\n",
            esc(title),
            esc(name),
            strip_prolog(svg)
        );
    }
    h.push_str("<h2>Counts</h2>\n");
    h.push_str(&counts(series, run));
    h.push_str("</body></html>\n");
    h
}

/// The tick path's headline: per class a freshness row and a delivered
/// latency row, then the two sentences. Nothing when the logs hold no
/// subscriber series (an engine-only directory).
fn tick_section(series: &[Series]) -> String {
    let tp = tick_path(series);
    if tp.classes.is_empty() {
        return String::new();
    }
    let mut h = String::from(
        "<h2>Tick path: what a reader waits for</h2>\n<table id=\"tick-path\"><thead><tr>\
         <th class=\"name\">class</th><th class=\"name\">measure</th><th>count</th>\
         <th>p50</th><th>p99</th><th>p99.9</th><th>max</th></tr></thead><tbody>\n",
    );
    let mut any_freshness = false;
    for c in &tp.classes {
        for (measure, p) in [
            ("freshness", &c.freshness),
            ("delivered latency", &c.delivered_latency),
        ] {
            let Some(p) = p else { continue };
            any_freshness |= measure == "freshness";
            let _ = writeln!(
                h,
                "<tr class=\"{}\" data-class=\"{}\"><td class=\"name\">{}</td><td class=\"name\">{}</td><td>{}</td>{}</tr>",
                measure.replace(' ', "-"),
                esc(&c.class),
                esc(&c.class),
                measure,
                p.count,
                cells(p, &[("p50", p.p50_us), ("p99", p.p99_us), ("p999", p.p999_us), ("max", p.max_us)])
            );
        }
    }
    h.push_str("</tbody></table>\n");
    let first = if any_freshness {
        tp.freshness_means
    } else {
        NO_FRESHNESS
    };
    for sentence in [first, tp.delivered_latency_means] {
        let _ = writeln!(h, "<p class=\"means\">{}.</p>", esc(&capitalised(sentence)));
    }
    h
}

/// `freshness: …` → `Freshness: …`.
fn capitalised(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map_or_else(String::new, |f| f.to_uppercase().chain(c).collect())
}

/// Latency cells: each value in its own unit, and in µs as `data-us`.
fn cells(p: &Percentiles, which: &[(&str, f64)]) -> String {
    let mut h = String::new();
    for (class, v) in which {
        let _ = write!(
            h,
            "<td class=\"{class}\" data-us=\"{}\">{}</td>",
            tickfan::metrics::report::round3(*v),
            if p.count == 0 {
                "–".into()
            } else {
                human(*v)
            }
        );
    }
    h
}

/// The SVG element alone (an XML prolog is not allowed inside HTML).
fn strip_prolog(svg: &str) -> &str {
    svg.find("<svg").map_or(svg, |i| &svg[i..])
}

fn table(series: &[Series]) -> String {
    let mut h = String::from(
        "<table id=\"percentiles\"><thead><tr><th class=\"name\">series</th><th>count</th>\
         <th>p50</th><th>p90</th><th>p99</th><th>p99.9</th><th>max</th></tr></thead><tbody>\n",
    );
    for s in series {
        let p = &s.pct;
        let _ = write!(
            h,
            "<tr data-series=\"{}\"><td class=\"name\">{}</td><td>{}</td>",
            esc(&s.name()),
            esc(&s.name()),
            p.count
        );
        h.push_str(&cells(
            p,
            &[
                ("p50", p.p50_us),
                ("p90", p.p90_us),
                ("p99", p.p99_us),
                ("p999", p.p999_us),
                ("max", p.max_us),
            ],
        ));
        h.push_str("</tr>\n");
    }
    h.push_str("</tbody></table>\n");
    h
}

fn counts(series: &[Series], run: Option<&serde_json::Value>) -> String {
    let mut h = String::from(
        "<table id=\"counts\"><thead><tr><th class=\"name\">what</th><th>count</th></tr></thead><tbody>\n",
    );
    for s in series {
        let partial = s.intervals.iter().filter(|p| p.partial).count();
        let _ = writeln!(
            h,
            "<tr><td class=\"name\">{} samples ({} intervals{})</td><td>{}</td></tr>",
            esc(&s.name()),
            s.intervals.len(),
            if partial > 0 {
                ", last one partial"
            } else {
                ""
            },
            s.pct.count
        );
    }
    if let Some(run) = run {
        let mut rows = Vec::new();
        if let Some(e) = run.get("elapsed_s").and_then(|v| v.as_f64()) {
            rows.push(("engine ran (s)".to_string(), format!("{e:.1}")));
        }
        if let Some(c) = run.get("counters") {
            flatten("", c, &mut rows);
        }
        for k in ["late_samples", "lost_samples"] {
            if let Some(v) = run.get(k) {
                rows.push((k.replace('_', " "), v.to_string()));
            }
        }
        for (k, v) in rows.iter().take(200) {
            let _ = writeln!(
                h,
                "<tr><td class=\"name\">{}</td><td>{}</td></tr>",
                esc(k),
                esc(v)
            );
        }
    }
    h.push_str("</tbody></table>\n");
    h
}

/// Scalar counters with dotted names (`orders.accepted`); arrays of pairs
/// (`[reason, n]`) as `name.reason`.
fn flatten(prefix: &str, v: &serde_json::Value, out: &mut Vec<(String, String)>) {
    let name = |k: &str| {
        if prefix.is_empty() {
            k.replace('_', " ")
        } else {
            format!("{prefix}.{}", k.replace('_', " "))
        }
    };
    match v {
        serde_json::Value::Object(m) => {
            for (k, v) in m {
                flatten(&name(k), v, out);
            }
        }
        serde_json::Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                match x.as_array().map(|p| p.as_slice()) {
                    Some([serde_json::Value::String(k), n]) => {
                        out.push((name(k), n.to_string()));
                    }
                    _ => flatten(&name(&i.to_string()), x, out),
                }
            }
        }
        serde_json::Value::Number(n) => out.push((prefix.to_string(), n.to_string())),
        _ => {}
    }
}
