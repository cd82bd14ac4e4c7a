//! The venue simulator, the default bridge.
//!
//! Each attempt: wait the latency (real time), then, in this order: inside a
//! scheduled outage → transient failure `outage`; with probability
//! `permanent` → permanent `rejected_by_venue` (decided per order, so every
//! attempt of that order gets the same answer); with probability `transient`
//! → transient `unavailable`; otherwise executed: the whole quantity, or with
//! probability `partial` a random part of it (possibly nothing), split into
//! 1..=`max_fills` fills at prices near the symbol's reference price.
//! The latency grows by `per_lot` for every lot ordered.
//!
//! Delivery, like a real venue link: with probability `reorder` the fills of
//! an execution arrive shuffled; each fill arrives a second time with
//! probability `dup` (somewhere after the first copy); each fill but the last
//! is lost with probability `lose`. Every fill carries absolute values, so
//! the engine's sequencer (`crate::order::fills`) restores the order, ignores the
//! copies and skips the gaps.
//!
//! Deterministic: every random draw comes from a generator seeded with
//! `(seed, order id, attempt)`, so outcomes do not depend on which worker
//! thread runs the attempt or when.
//!
//! Idempotent by order id, like a venue keyed on the client order id: the
//! one piece of state is its execution record ([`super::exec_log`]), locked
//! around the decision, so an id executes at most once per venue (while
//! remembered: the newest [`super::exec_log::MEMORY_IDS`] ids) and a
//! re-sent id, whatever its attempt or fencing token, gets the first
//! execution's fills. With `exec_log=PATH` the record survives restarts.
//!
//! Hang (`hang=P`): after the latency, with probability P the attempt
//! sleeps `hang_for` (default 60 s) and then answers transient `hung`
//! without executing, as a venue that dropped the request. The call thread
//! it holds is the engine's to bound (`order::venue (the lease)`): a hung call
//! ends by itself after `hang_for`; its late answer is discarded there.

use std::hash::{Hash, Hasher};
use std::io;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{RngExt, SeedableRng};

use super::exec_log::{ExecRecord, MEMORY_IDS};
use super::spec::{Latency, SimSpec};
use super::{Bridge, BridgeOrder, Outcome, VenueFill};
use crate::model::units::{Amount, Lots, Price};

/// A simulated venue.
#[derive(Debug)]
pub struct SimBridge {
    spec: SimSpec,
    /// Engine-clock time of engine start (outages are measured from it).
    start_ns: u64,
    /// What it executed (idempotency by order id).
    record: ExecRecord,
}

fn hash_of(parts: &[&[u8]], n: u64) -> u64 {
    let mut h = rustc_hash::FxHasher::default();
    for p in parts {
        p.hash(&mut h);
    }
    n.hash(&mut h);
    h.finish()
}

impl SimBridge {
    /// A simulator with its execution record in memory only (the spec's
    /// `exec_log` is not read: use [`open`](Self::open) for that); outages
    /// count from `start_ns` on the engine clock.
    pub fn new(spec: SimSpec, start_ns: u64) -> Self {
        SimBridge {
            spec,
            start_ns,
            record: ExecRecord::in_memory(MEMORY_IDS),
        }
    }

    /// A simulator whose execution record is the spec's `exec_log` file
    /// (read now, appended to before each executed answer); in memory when
    /// the spec has none.
    ///
    /// # Errors
    /// The file cannot be opened or read, or holds a bad line (the message
    /// names the file).
    pub fn open(spec: SimSpec, start_ns: u64) -> io::Result<Self> {
        let record = match &spec.exec_log {
            Some(path) => ExecRecord::open(path, MEMORY_IDS)?,
            None => ExecRecord::in_memory(MEMORY_IDS),
        };
        Ok(SimBridge {
            spec,
            start_ns,
            record,
        })
    }

    /// Its settings.
    pub fn spec(&self) -> &SimSpec {
        &self.spec
    }

    /// Is the venue inside a scheduled outage at `now_ns`?
    pub fn is_down(&self, now_ns: u64) -> bool {
        let t = Duration::from_nanos(now_ns.saturating_sub(self.start_ns));
        self.spec.outages.iter().any(|o| o.covers(t))
    }

    /// The latency of one attempt, drawn from the spec's distribution.
    pub fn draw_latency(&self, rng: &mut StdRng) -> Duration {
        match self.spec.latency {
            Latency::Fixed(d) => d,
            Latency::Uniform(a, b) => {
                let (a, b) = (a.as_nanos() as u64, b.as_nanos() as u64);
                Duration::from_nanos(rng.random_range(a..=b))
            }
            Latency::Exp(mean) => {
                let u: f64 = rng.random::<f64>().max(1e-12);
                let x = (-u.ln()).min(20.0);
                Duration::from_secs_f64(mean.as_secs_f64() * x)
            }
        }
    }

    /// The outcome of one attempt, without waiting the latency (the worker
    /// path waits; the retry experiment uses this directly).
    pub fn decide(&self, order: &BridgeOrder<'_>, now_ns: u64, rng: &mut StdRng) -> Outcome {
        if self.is_down(now_ns) {
            return Outcome::Transient("outage".into());
        }
        // Per order, not per attempt: a venue that refuses an order refuses it every time.
        let mut per_order =
            StdRng::seed_from_u64(hash_of(&[order.order_id.as_bytes()], self.spec.seed));
        if per_order.random_bool(self.spec.permanent) {
            return Outcome::Permanent("rejected_by_venue".into());
        }
        if rng.random_bool(self.spec.transient) {
            return Outcome::Transient("unavailable".into());
        }
        let filled = if rng.random_bool(self.spec.partial) {
            rng.random_range(0..order.qty.0)
        } else {
            order.qty.0
        };
        let fills = self.split(order.symbol, filled, rng);
        Outcome::Executed(self.deliver(fills, rng))
    }

    /// Shapes the delivery of `fills` (in fill-number order): loses, shuffles
    /// and duplicates them as the spec says.
    fn deliver(&self, mut fills: Vec<VenueFill>, rng: &mut StdRng) -> Vec<VenueFill> {
        let s = &self.spec;
        if s.lose > 0.0 && fills.len() > 1 {
            let last = fills.len() - 1;
            let mut i = 0;
            fills.retain(|_| {
                let keep = i == last || !rng.random_bool(s.lose);
                i += 1;
                keep
            });
        }
        if s.reorder > 0.0 && rng.random_bool(s.reorder) {
            fills.shuffle(rng);
        }
        if s.dup > 0.0 {
            let n = fills.len();
            for i in 0..n {
                if rng.random_bool(s.dup) {
                    let at = rng.random_range(i + 1..=fills.len());
                    fills.insert(at, fills[i]);
                }
            }
        }
        fills
    }

    fn split(&self, symbol: &str, filled: u64, rng: &mut StdRng) -> Vec<VenueFill> {
        if filled == 0 {
            return Vec::new();
        }
        let n = rng
            .random_range(1..=u64::from(self.spec.max_fills))
            .min(filled);
        // n − 1 distinct cut points in 1..filled, sorted: fill sizes ≥ 0.01 lot.
        let mut cuts: Vec<u64> = Vec::with_capacity(n as usize);
        while (cuts.len() as u64) < n - 1 {
            let c = rng.random_range(1..filled);
            if !cuts.contains(&c) {
                cuts.push(c);
            }
        }
        cuts.sort_unstable();
        cuts.push(filled);
        let reference = 50_000 + hash_of(&[symbol.as_bytes()], 0) % 150_000;
        let mut fills = Vec::with_capacity(cuts.len());
        let (mut prev, mut amount) = (0u64, Amount(0));
        for (i, cum) in cuts.into_iter().enumerate() {
            let price = Price((reference as i64 + rng.random_range(-20i64..=20)) as u64);
            amount = Amount(amount.0 + Amount::of(Lots(cum - prev), price).0);
            fills.push(VenueFill {
                fill_no: i as u32 + 1,
                cum_lots: Lots(cum),
                cum_amount: amount,
                price,
            });
            prev = cum;
        }
        fills
    }

    fn rng_for(&self, order: &BridgeOrder<'_>) -> StdRng {
        StdRng::seed_from_u64(hash_of(
            &[order.order_id.as_bytes(), self.spec.name.as_bytes()],
            self.spec.seed ^ (u64::from(order.attempt) << 40),
        ))
    }
}

impl Bridge for SimBridge {
    fn name(&self) -> &str {
        &self.spec.name
    }

    fn execute(&self, order: &BridgeOrder<'_>, now_ns: u64) -> Outcome {
        let mut rng = self.rng_for(order);
        let latency =
            self.draw_latency(&mut rng) + self.spec.per_lot.mul_f64(order.qty.0 as f64 / 100.0);
        if !latency.is_zero() {
            std::thread::sleep(latency);
        }
        if self.spec.hang > 0.0 && rng.random_bool(self.spec.hang) {
            std::thread::sleep(self.spec.hang_for);
            return Outcome::Transient("hung".into());
        }
        // A venue in an outage answers nothing from its record either.
        if self.is_down(now_ns) {
            return Outcome::Transient("outage".into());
        }
        self.record
            .once(order.order_id, || self.decide(order, now_ns, &mut rng))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bridge::spec::Outage;
    use crate::model::units::Side;

    fn order(id: &str, qty: u64, attempt: u32) -> BridgeOrder<'_> {
        BridgeOrder {
            order_id: id,
            symbol: "EURUSD",
            side: Side::Buy,
            qty: Lots(qty),
            attempt,
            fence_token: u64::from(attempt),
        }
    }

    #[test]
    fn outage_window_fails_transiently_then_recovers() {
        let spec = SimSpec {
            outages: vec![Outage {
                from: Duration::from_secs(10),
                len: Duration::from_secs(5),
            }],
            ..SimSpec::instant("a")
        };
        let b = SimBridge::new(spec, 1_000);
        let s = 1_000_000_000u64;
        assert!(matches!(
            b.execute(&order("o", 100, 1), 1_000 + 9 * s),
            Outcome::Executed(_)
        ));
        assert_eq!(
            b.execute(&order("o", 100, 1), 1_000 + 10 * s),
            Outcome::Transient("outage".into())
        );
        assert!(b.is_down(1_000 + 15 * s - 1));
        assert!(!b.is_down(1_000 + 15 * s));
    }

    #[test]
    fn fills_are_absolute_increasing_and_add_up() {
        let spec = SimSpec {
            max_fills: 5,
            partial: 0.5,
            ..SimSpec::instant("a")
        };
        let b = SimBridge::new(spec, 0);
        let mut partial = 0;
        for i in 0..500 {
            let id = format!("o{i}");
            let Outcome::Executed(fills) = b.execute(&order(&id, 300, 1), 0) else {
                panic!("no failures configured");
            };
            let mut prev = (0, Lots(0), Amount(0));
            for f in &fills {
                assert_eq!(f.fill_no, prev.0 + 1);
                assert!(f.cum_lots > prev.1 && f.cum_amount > prev.2);
                assert_eq!(
                    f.cum_amount.0 - prev.2 .0,
                    Amount::of(Lots(f.cum_lots.0 - prev.1 .0), f.price).0
                );
                prev = (f.fill_no, f.cum_lots, f.cum_amount);
            }
            assert!(fills.len() <= 5);
            if prev.1 < Lots(300) {
                partial += 1;
            }
        }
        assert!(
            (150..350).contains(&partial),
            "about half partial: {partial}"
        );
    }

    #[test]
    fn probabilities_are_roughly_right_and_permanent_is_per_order() {
        let spec = SimSpec {
            transient: 0.2,
            permanent: 0.1,
            ..SimSpec::instant("a")
        };
        let b = SimBridge::new(spec, 0);
        let (mut t, mut p) = (0, 0);
        for i in 0..2_000 {
            let id = format!("o{i}");
            match b.execute(&order(&id, 1, 1), 0) {
                Outcome::Transient(_) => t += 1,
                Outcome::Permanent(_) => {
                    p += 1;
                    assert!(matches!(
                        b.execute(&order(&id, 1, 2), 0),
                        Outcome::Permanent(_)
                    ));
                }
                Outcome::Executed(_) => {}
            }
        }
        assert!((100..300).contains(&p), "permanent {p}");
        assert!((260..460).contains(&t), "transient {t}");
    }

    #[test]
    fn delivery_reorders_duplicates_and_loses_but_never_the_last() {
        let spec = SimSpec {
            max_fills: 6,
            reorder: 0.5,
            dup: 0.2,
            lose: 0.1,
            ..SimSpec::instant("a")
        };
        let b = SimBridge::new(spec, 0);
        let (mut shuffled, mut dups, mut lost) = (0, 0, 0);
        for i in 0..500 {
            let id = format!("o{i}");
            let Outcome::Executed(got) = b.execute(&order(&id, 600, 1), 0) else {
                panic!("no failures configured");
            };
            let mut nos: Vec<u32> = got.iter().map(|f| f.fill_no).collect();
            if nos.windows(2).any(|w| w[0] > w[1]) {
                shuffled += 1;
            }
            // Every copy carries the same absolute values as the original.
            for f in &got {
                assert!(got
                    .iter()
                    .filter(|g| g.fill_no == f.fill_no)
                    .all(|g| g == f));
            }
            let before = nos.len();
            nos.sort_unstable();
            nos.dedup();
            dups += before - nos.len();
            let last = *nos.last().unwrap();
            assert_eq!(
                got.iter().find(|f| f.fill_no == last).unwrap().cum_lots,
                Lots(600),
                "the final fill always arrives"
            );
            lost += last as usize - nos.len();
        }
        assert!(shuffled > 100, "shuffled {shuffled}");
        assert!(dups > 100, "duplicates {dups}");
        assert!(lost > 20, "lost {lost}");
        let plain = SimBridge::new(
            SimSpec {
                max_fills: 6,
                ..SimSpec::instant("a")
            },
            0,
        );
        let Outcome::Executed(got) = plain.execute(&order("p", 600, 1), 0) else {
            panic!()
        };
        assert!(
            got.iter()
                .enumerate()
                .all(|(i, f)| f.fill_no == i as u32 + 1),
            "off by default in instant()"
        );
    }

    #[test]
    fn same_order_and_attempt_same_outcome() {
        let b = SimBridge::new(
            SimSpec {
                transient: 0.5,
                max_fills: 4,
                ..SimSpec::instant("a")
            },
            0,
        );
        for i in 0..50 {
            let id = format!("x{i}");
            assert_eq!(
                b.execute(&order(&id, 77, 2), 0),
                b.execute(&order(&id, 77, 2), 0)
            );
        }
    }

    #[test]
    fn an_id_executes_once_whatever_the_attempt_and_after_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("venue.log");
        let spec = SimSpec {
            max_fills: 4,
            exec_log: Some(log.clone()),
            ..SimSpec::instant("a")
        };
        let b = SimBridge::open(spec.clone(), 0).unwrap();
        let first = b.execute(&order("k1", 400, 1), 0);
        assert!(matches!(first, Outcome::Executed(_)));
        // Another attempt draws other fills if executed again: it is not.
        assert_eq!(b.execute(&order("k1", 400, 7), 0), first);
        drop(b);
        let b = SimBridge::open(spec, 0).unwrap();
        assert_eq!(b.execute(&order("k1", 400, 9), 0), first, "after a restart");
        let record = crate::bridge::exec_log::read(&log).unwrap();
        assert_eq!(record.len(), 1, "executed once: {record:?}");
        assert_eq!(Outcome::Executed(record[0].1.clone()), first);
        // Without exec_log: still idempotent within the process.
        let m = SimBridge::new(
            SimSpec {
                max_fills: 4,
                ..SimSpec::instant("m")
            },
            0,
        );
        let a = m.execute(&order("k2", 400, 1), 0);
        assert_eq!(m.execute(&order("k2", 400, 2), 0), a);
    }

    #[test]
    fn a_hung_attempt_answers_transient_after_hang_for_without_executing() {
        let b = SimBridge::new(
            SimSpec {
                hang: 1.0,
                hang_for: Duration::from_millis(1),
                ..SimSpec::instant("h")
            },
            0,
        );
        assert_eq!(
            b.execute(&order("h1", 1, 1), 0),
            Outcome::Transient("hung".into())
        );
        assert!(
            b.record
                .once("h1", || Outcome::Transient("not executed".into()))
                == Outcome::Transient("not executed".into())
        );
    }
}
