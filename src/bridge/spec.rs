//! The simulator's settings and their text form (the `--bridge` flag).
//!
//! ```text
//! --bridge name=lp1,latency=uniform:1ms..5ms,transient=0.01,permanent=0.001,down=10s+5s,fills=3,partial=0.05,seed=7
//! --bridge name=lp2,per_lot=2ms,reorder=0.2,dup=0.1,lose=0.01
//! --bridge name=lp3,exec_log=venue3.log,hang=0.01,hang_for=30s
//! --bridge name=lp4,latency=2ms,max_inflight=8
//! ```
//!
//! Every key is optional; `down=` may repeat (one outage each, `FROM+FOR`
//! measured from engine start). Latency: `fixed:D`, `uniform:D1..D2` or
//! `exp:MEAN` (exponential), durations as `250us`, `2ms`, `1s`; `per_lot`
//! adds a duration per lot ordered (a large order takes longer in one
//! piece). `reorder`, `dup` and `lose` shape how fills are delivered (see
//! [`SimSpec`]). `exec_log` keeps the venue's execution record in a file
//! across restarts (see [`super::exec_log`]); `hang` is the probability that
//! an attempt does not answer for `hang_for` (then answers transient
//! `hung`, having executed nothing). `max_inflight` caps the calls the
//! engine has at that venue at once (`order::venue (in-flight calls)`; default no cap).

use std::path::PathBuf;
use std::time::Duration;

/// A latency distribution.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub enum Latency {
    /// Always the same.
    Fixed(Duration),
    /// Uniform between the two (inclusive).
    Uniform(Duration, Duration),
    /// Exponential with this mean (capped at 20 × the mean).
    Exp(Duration),
}

/// A scheduled outage: every attempt in `[from, from + len)` fails transiently.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Outage {
    /// Start, since engine start.
    pub from: Duration,
    /// Length.
    pub len: Duration,
}

impl Outage {
    /// Is `t` (since engine start) inside the outage?
    pub fn covers(&self, t: Duration) -> bool {
        t >= self.from && t < self.from + self.len
    }
}

/// One simulated venue.
///
/// One field per key of its `--bridge` spec, so over 15 fields.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct SimSpec {
    /// Name in reports and dead letters.
    pub name: String,
    /// Time one attempt takes.
    pub latency: Latency,
    /// Probability that an attempt fails transiently (503-like).
    pub transient: f64,
    /// Probability that an order is refused permanently (400-like).
    pub permanent: f64,
    /// Scheduled outages.
    pub outages: Vec<Outage>,
    /// Most fills one execution is split into (at least 1).
    pub max_fills: u32,
    /// Probability that only part of the quantity is filled (a random part, possibly none).
    pub partial: f64,
    /// Random seed (outcomes are a function of seed, order id and attempt).
    pub seed: u64,
    /// Added to the latency per lot ordered (0: size does not matter).
    pub per_lot: Duration,
    /// Probability that an execution's fills are delivered in a shuffled order.
    pub reorder: f64,
    /// Probability that each fill is delivered a second time (later).
    pub dup: f64,
    /// Probability that each fill but the last is never delivered (a gap the
    /// engine's gap timer must skip; the final report always arrives).
    pub lose: f64,
    /// Probability that an attempt hangs: it answers nothing for `hang_for`,
    /// then transient `hung` without having executed (the engine's lease
    /// abandons it long before; see `order::venue (the lease)`).
    pub hang: f64,
    /// How long a hung attempt blocks (at most 10 min).
    pub hang_for: Duration,
    /// The venue's execution record file (`None`: in memory only).
    pub exec_log: Option<PathBuf>,
    /// Most calls at this venue at once (`None`: no cap). Enforced by the
    /// engine's workers (`order::venue (in-flight calls)`), for any bridge of this name.
    pub max_inflight: Option<u32>,
}

impl SimSpec {
    /// The default venue `name`: 200 µs–1 ms latency, 1% transient, no
    /// permanent failure, no outage, up to 3 fills, no partial fills; 5% of
    /// executions deliver their fills out of order and 1% of fills arrive
    /// twice (none lost), so the engine's fill sequencer is always exercised.
    pub fn named(name: &str) -> Self {
        SimSpec {
            name: name.to_string(),
            latency: Latency::Uniform(Duration::from_micros(200), Duration::from_millis(1)),
            transient: 0.01,
            permanent: 0.0,
            outages: Vec::new(),
            max_fills: 3,
            partial: 0.0,
            seed: 1,
            per_lot: Duration::ZERO,
            reorder: 0.05,
            dup: 0.01,
            lose: 0.0,
            hang: 0.0,
            hang_for: Duration::from_secs(60),
            exec_log: None,
            max_inflight: None,
        }
    }

    /// A venue for tests: no latency, no failure, one fill, delivered in order once.
    pub fn instant(name: &str) -> Self {
        SimSpec {
            latency: Latency::Fixed(Duration::ZERO),
            transient: 0.0,
            max_fills: 1,
            reorder: 0.0,
            dup: 0.0,
            ..SimSpec::named(name)
        }
    }

    /// Parses the `--bridge` text form, starting from `SimSpec::named("simN")`.
    ///
    /// # Errors
    /// One line naming the bad key or value.
    pub fn parse(s: &str, default_name: &str) -> Result<SimSpec, String> {
        let mut spec = SimSpec::named(default_name);
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (k, v) = part
                .split_once('=')
                .ok_or_else(|| format!("expected KEY=VALUE, got '{part}'"))?;
            let prob = |v: &str| -> Result<f64, String> {
                let p: f64 = v
                    .parse()
                    .map_err(|_| format!("{k}: '{v}' is not a number"))?;
                if (0.0..=1.0).contains(&p) {
                    Ok(p)
                } else {
                    Err(format!("{k}: probability must be in 0..1, got {v}"))
                }
            };
            match k {
                "name" => {
                    if v.is_empty() || v.contains(char::is_whitespace) {
                        return Err(format!("name: '{v}' must be non-empty without spaces"));
                    }
                    spec.name = v.to_string();
                }
                "latency" => spec.latency = parse_latency(v)?,
                "transient" => spec.transient = prob(v)?,
                "permanent" => spec.permanent = prob(v)?,
                "partial" => spec.partial = prob(v)?,
                "reorder" => spec.reorder = prob(v)?,
                "dup" => spec.dup = prob(v)?,
                "lose" => spec.lose = prob(v)?,
                "hang" => spec.hang = prob(v)?,
                "hang_for" => {
                    spec.hang_for = dur(k, v)?;
                    if spec.hang_for > Duration::from_secs(600) {
                        return Err("hang_for: at most 10m".into());
                    }
                }
                "exec_log" => {
                    if v.is_empty() {
                        return Err("exec_log: expected a file path".into());
                    }
                    spec.exec_log = Some(PathBuf::from(v));
                }
                "per_lot" => {
                    spec.per_lot = dur(k, v)?;
                    if spec.per_lot > Duration::from_secs(1) {
                        return Err("per_lot: at most 1s".into());
                    }
                }
                "fills" => {
                    spec.max_fills = v
                        .parse()
                        .ok()
                        .filter(|n| (1..=100).contains(n))
                        .ok_or_else(|| format!("fills: '{v}' must be 1..100"))?
                }
                "max_inflight" => {
                    spec.max_inflight = Some(
                        v.parse()
                            .ok()
                            .filter(|n| (1..=100_000).contains(n))
                            .ok_or_else(|| {
                                format!("max_inflight: '{v}' must be a whole number 1..100000")
                            })?,
                    )
                }
                "seed" => {
                    spec.seed = v
                        .parse()
                        .map_err(|_| format!("seed: '{v}' is not a number"))?
                }
                "down" => {
                    let (from, len) = v
                        .split_once('+')
                        .ok_or_else(|| format!("down: expected FROM+FOR (e.g. 10s+5s), got '{v}'"))?;
                    spec.outages.push(Outage {
                        from: dur(k, from)?,
                        len: dur(k, len)?,
                    });
                }
                other => {
                    return Err(format!(
                        "unknown key '{other}' (known: name, latency, transient, permanent, down, fills, partial, seed, per_lot, reorder, dup, lose, hang, hang_for, exec_log, max_inflight)"
                    ))
                }
            }
        }
        if spec.transient + spec.permanent > 1.0 {
            return Err("transient + permanent must not exceed 1".into());
        }
        Ok(spec)
    }
}

/// The accepted forms of `latency=`, quoted by every error about it.
const LATENCY_FORMS: &str =
    "accepted: D, fixed:D, uniform:MIN..MAX or exp:MEAN, with durations such as 250us, 2ms, 1s";

/// A duration value of key `key`; the error names the key and the form.
fn dur(key: &str, s: &str) -> Result<Duration, String> {
    humantime::parse_duration(s.trim()).map_err(|e| {
        format!("{key}: '{s}' is not a duration ({e}; write it as 250us, 2ms, 1s or 1m)")
    })
}

fn parse_latency(v: &str) -> Result<Latency, String> {
    let (kind, arg) = v.split_once(':').unwrap_or(("fixed", v));
    let d = |s: &str| {
        humantime::parse_duration(s.trim())
            .map_err(|e| format!("latency: '{v}' is not a latency ({e}); {LATENCY_FORMS}"))
    };
    let l = match kind {
        "fixed" => Latency::Fixed(d(arg)?),
        "uniform" => {
            let (a, b) = arg
                .split_once("..")
                .ok_or_else(|| format!("latency: '{v}' is not a latency; {LATENCY_FORMS}"))?;
            let (a, b) = (d(a)?, d(b)?);
            if a > b {
                return Err(format!("latency: {a:?} > {b:?}"));
            }
            Latency::Uniform(a, b)
        }
        "exp" => Latency::Exp(d(arg)?),
        other => {
            return Err(format!(
                "latency: unknown kind '{other}' in '{v}'; {LATENCY_FORMS}"
            ))
        }
    };
    let max = match l {
        Latency::Fixed(d) | Latency::Exp(d) => d,
        Latency::Uniform(_, b) => b,
    };
    if max > Duration::from_secs(10) {
        return Err("latency: at most 10s".into());
    }
    Ok(l)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_key() {
        let s = SimSpec::parse(
            "name=lp1,latency=uniform:1ms..5ms,transient=0.1,permanent=0.01,down=10s+5s,down=1m+30s,fills=4,partial=0.2,seed=9",
            "sim1",
        )
        .unwrap();
        assert_eq!(s.name, "lp1");
        assert_eq!(
            s.latency,
            Latency::Uniform(Duration::from_millis(1), Duration::from_millis(5))
        );
        assert_eq!((s.transient, s.permanent, s.partial), (0.1, 0.01, 0.2));
        assert_eq!(s.outages.len(), 2);
        assert!(s.outages[0].covers(Duration::from_secs(12)));
        assert!(!s.outages[0].covers(Duration::from_secs(15)));
        assert_eq!((s.max_fills, s.seed), (4, 9));
        let s = SimSpec::parse("per_lot=2ms,reorder=0.5,dup=0.25,lose=0.125", "x").unwrap();
        assert_eq!(s.per_lot, Duration::from_millis(2));
        assert_eq!((s.reorder, s.dup, s.lose), (0.5, 0.25, 0.125));
        let s = SimSpec::parse("hang=0.5,hang_for=2s,exec_log=/tmp/v.log", "x").unwrap();
        assert_eq!((s.hang, s.hang_for), (0.5, Duration::from_secs(2)));
        assert_eq!(s.exec_log, Some(PathBuf::from("/tmp/v.log")));
        assert_eq!(
            SimSpec::parse("max_inflight=8", "x").unwrap().max_inflight,
            Some(8)
        );
        assert_eq!(SimSpec::parse("", "x").unwrap(), SimSpec::named("x"));
        assert_eq!(
            SimSpec::parse("latency=2ms", "x").unwrap().latency,
            Latency::Fixed(Duration::from_millis(2))
        );
    }

    #[test]
    fn refuses_clearly() {
        for (s, want) in [
            ("transient=2", "probability"),
            ("latency=normal:1ms", "unknown kind"),
            ("down=10s", "FROM+FOR"),
            ("color=red", "unknown key"),
            ("fills=0", "fills"),
            ("dup=1.5", "probability"),
            ("per_lot=2s", "per_lot"),
            ("transient=0.6,permanent=0.6", "exceed"),
            ("latency", "KEY=VALUE"),
            ("latency=banana", "latency: 'banana' is not a latency"),
            ("latency=banana", "uniform:MIN..MAX"),
            ("latency=uniform:1ms", "uniform:MIN..MAX"),
            ("latency=uniform:1ms..x", "exp:MEAN"),
            ("per_lot=slow", "per_lot: 'slow' is not a duration"),
            ("down=soon+5s", "down: 'soon' is not a duration"),
            ("hang=2", "probability"),
            ("hang_for=1h", "hang_for"),
            ("exec_log=", "exec_log"),
            ("max_inflight=0", "max_inflight: '0' must be a whole number"),
            ("max_inflight=many", "max_inflight: 'many'"),
            ("max_inflight=-1", "max_inflight"),
        ] {
            let e = SimSpec::parse(s, "x").unwrap_err();
            assert!(e.contains(want), "{s}: {e}");
        }
    }
}
