//! `tickfan gen`: writes a synthetic tick file in the feed format.
//!
//! The model, all of it driven by one seeded PRNG (xoshiro256++, seeded
//! through SplitMix64, so the same seed gives the same bytes on every
//! machine and every run of the same tickfan build):
//!
//! - **Arrivals**: a Poisson process whose rate is `--rate` outside bursts
//!   and `--rate × --burst-factor` during the first `--burst-len` of every
//!   `--burst-every` (e.g. 50k/s with 100 ms at 250k/s each second).
//!   `ts_ns` starts at `--start-ns` (a fixed instant, not the wall clock).
//! - **Symbols**: FX-style pair names (`EURUSD`, `USDJPY`, …; a `.N` suffix
//!   past the 870 distinct pairs), chosen with Zipf popularity of exponent
//!   `--zipf` (rank 1 = the first name; 0 = uniform).
//! - **Output**: tickfan CSV, or with `--dbn` the same ticks as Databento
//!   DBN mbp-1 records, zstd-compressed ([`super::gen_dbn`]).
//! - **Prices**: a random walk per symbol in integer price ticks. Pairs
//!   priced above 20 quote 3 decimals (JPY-like), the others 5. The spread is
//!   1–8 price ticks; one quote in a thousand is locked or crossed (aggregated
//!   feeds produce them). Quantities are multiples of 100,000.

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use rand::rngs::Xoshiro256PlusPlus;
use rand::{RngExt, SeedableRng};
use rand_distr::{Distribution, Exp1, Normal, Zipf};

use tickfan::error::Failure;

/// The header line every generated file starts with.
pub const HEADER: &str = "ts_ns,symbol,bid,ask,bid_qty,ask_qty";

/// Flags of `tickfan gen`.
#[derive(Debug, Clone, Args)]
pub struct GenArgs {
    /// Write here (default: standard output).
    #[arg(short, long, value_name = "PATH")]
    pub out: Option<PathBuf>,
    /// Distinct symbols.
    #[arg(long, value_name = "N", default_value_t = 1_000)]
    pub symbols: usize,
    /// Number of ticks to write (default 100,000 unless --duration is given).
    #[arg(long, value_name = "N", conflicts_with = "duration")]
    pub ticks: Option<u64>,
    /// Write ticks covering this much source time instead (e.g. `10s`).
    #[arg(long, value_name = "DURATION", value_parser = super::flags::positive_duration)]
    pub duration: Option<Duration>,
    /// Base rate, ticks per second of source time.
    #[arg(long, value_name = "PER_SEC", default_value_t = 50_000.0)]
    pub rate: f64,
    /// Rate multiplier during bursts (1 = no bursts).
    #[arg(long, value_name = "X", default_value_t = 5.0)]
    pub burst_factor: f64,
    /// A burst starts this often.
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration, default_value = "1s")]
    pub burst_every: Duration,
    /// Length of each burst.
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration, default_value = "100ms")]
    pub burst_len: Duration,
    /// Zipf exponent of symbol popularity (0 = uniform).
    #[arg(long, value_name = "S", default_value_t = 1.0)]
    pub zipf: f64,
    /// Seed: the same seed writes the same file.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Write Databento DBN instead of CSV: schema mbp-1, DBN v3, zstd-compressed (a `.dbn.zst`).
    #[arg(long)]
    pub dbn: bool,
    /// `ts_ns` of the first tick's time base (ns since the Unix epoch).
    #[arg(long, value_name = "NS", default_value_t = 1_700_000_000_000_000_000)]
    pub start_ns: u64,
}

/// A validated generator model.
#[derive(Debug, Clone, PartialEq)]
pub struct GenSpec {
    /// Distinct symbols (≥ 1).
    pub symbols: usize,
    /// Base rate, ticks/s (> 0).
    pub rate: f64,
    /// Burst multiplier (≥ 1).
    pub burst_factor: f64,
    /// Burst period, ns (> 0).
    pub burst_every_ns: u64,
    /// Burst length, ns (≤ period).
    pub burst_len_ns: u64,
    /// Zipf exponent (≥ 0).
    pub zipf: f64,
    /// Seed.
    pub seed: u64,
    /// First time base, ns since the epoch.
    pub start_ns: u64,
}

impl GenSpec {
    /// The generator model of `args`.
    ///
    /// # Errors
    /// A value out of range, as a usage error naming the flag.
    pub fn from_args(a: &GenArgs) -> Result<GenSpec, Failure> {
        let bad = |m: &str| Err(Failure::Usage(m.to_string()));
        if a.symbols == 0 || a.symbols > 10_000_000 {
            return bad("--symbols must be between 1 and 10000000");
        }
        if !(a.rate > 0.0 && a.rate.is_finite()) {
            return bad("--rate must be positive");
        }
        if !(a.burst_factor >= 1.0 && a.burst_factor.is_finite()) {
            return bad("--burst-factor must be at least 1");
        }
        if a.burst_every.is_zero() || a.burst_len > a.burst_every {
            return bad("--burst-every must be positive and at least --burst-len");
        }
        if !(a.zipf >= 0.0 && a.zipf.is_finite()) {
            return bad("--zipf must be 0 or more");
        }
        Ok(GenSpec {
            symbols: a.symbols,
            rate: a.rate,
            burst_factor: a.burst_factor,
            burst_every_ns: a.burst_every.as_nanos() as u64,
            burst_len_ns: a.burst_len.as_nanos() as u64,
            zipf: a.zipf,
            seed: a.seed,
            start_ns: a.start_ns,
        })
    }

    /// The demo's model: `symbols` symbols, no bursts (the demo paces itself).
    pub fn steady(symbols: usize, seed: u64) -> GenSpec {
        GenSpec {
            symbols: symbols.max(1),
            rate: 50_000.0,
            burst_factor: 1.0,
            burst_every_ns: 1_000_000_000,
            burst_len_ns: 0,
            zipf: 1.0,
            seed,
            start_ns: 1_700_000_000_000_000_000,
        }
    }
}

const CURRENCIES: [&str; 30] = [
    "EUR", "USD", "JPY", "GBP", "CHF", "AUD", "CAD", "NZD", "SEK", "NOK", "DKK", "PLN", "HUF",
    "CZK", "TRY", "ZAR", "MXN", "SGD", "HKD", "CNH", "KRW", "INR", "BRL", "ILS", "THB", "TWD",
    "CLP", "COP", "IDR", "PHP",
];

/// Name of symbol `i`: the `i`-th ordered currency pair, `.N` past the last pair.
pub fn symbol_name(i: usize) -> String {
    let k = CURRENCIES.len();
    let pairs = k * (k - 1);
    let (round, j) = (i / pairs, i % pairs);
    let base = j / (k - 1);
    let mut quote = j % (k - 1);
    if quote >= base {
        quote += 1;
    }
    let name = format!("{}{}", CURRENCIES[base], CURRENCIES[quote]);
    if round == 0 {
        name
    } else {
        format!("{name}.{round}")
    }
}

/// One symbol's random walk.
#[derive(Debug, Clone)]
struct Walk {
    name: String,
    /// Mid price in price ticks (10^-decimals).
    mid: i64,
    decimals: u32,
}

/// One generated tick: prices in price ticks of `10^-decimals`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GenQuote {
    /// Source time, ns since the epoch.
    pub ts_ns: u64,
    /// The symbol's index (its name: [`TickGen::name`]).
    pub symbol: usize,
    /// Bid, in price ticks.
    pub bid: i64,
    /// Ask, in price ticks.
    pub ask: i64,
    /// Decimals of a price tick (3 or 5).
    pub decimals: u32,
    /// Quantity at the bid.
    pub bid_qty: u64,
    /// Quantity at the ask.
    pub ask_qty: u64,
}

/// The tick generator: an endless, deterministic stream of feed lines.
#[derive(Debug)]
pub struct TickGen {
    spec: GenSpec,
    rng: Xoshiro256PlusPlus,
    zipf: Zipf<f64>,
    step: Normal<f64>,
    walks: Vec<Walk>,
    /// Source time of the next tick, ns since `start_ns`.
    t_ns: f64,
}

impl TickGen {
    /// A generator for `spec`.
    pub fn new(spec: &GenSpec) -> TickGen {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(spec.seed);
        let walks = (0..spec.symbols)
            .map(|i| {
                // Log-uniform mid between 0.2 and 200.
                let mid: f64 = (0.2f64.ln() + rng.random::<f64>() * (1000f64).ln()).exp();
                let decimals = if mid >= 20.0 { 3 } else { 5 };
                Walk {
                    name: symbol_name(i),
                    mid: (mid * 10f64.powi(decimals as i32)).round() as i64,
                    decimals,
                }
            })
            .collect();
        TickGen {
            zipf: Zipf::new(spec.symbols as f64, spec.zipf).expect("validated exponent"),
            step: Normal::new(0.0, 1.5).expect("static parameters"),
            spec: spec.clone(),
            rng,
            walks,
            t_ns: 0.0,
        }
    }

    fn rate_at(&self, t_ns: f64) -> f64 {
        let in_period = (t_ns as u64) % self.spec.burst_every_ns;
        if in_period < self.spec.burst_len_ns {
            self.spec.rate * self.spec.burst_factor
        } else {
            self.spec.rate
        }
    }

    /// The next tick, as numbers.
    pub fn next_quote(&mut self) -> GenQuote {
        let ts = self.spec.start_ns + self.t_ns as u64;
        let gap: f64 = Exp1.sample(&mut self.rng);
        self.t_ns += gap / self.rate_at(self.t_ns) * 1e9;
        let s = (self.zipf.sample(&mut self.rng) as usize).clamp(1, self.walks.len()) - 1;
        let step = self.step.sample(&mut self.rng).round() as i64;
        let spread: i64 = self.rng.random_range(1..=8);
        let crossed = self.rng.random_range(0..1000) == 0;
        let (bid_qty, ask_qty): (u64, u64) = (
            self.rng.random_range(1..=50) * 100_000,
            self.rng.random_range(1..=50) * 100_000,
        );
        let w = &mut self.walks[s];
        w.mid = (w.mid + step).max(20);
        let half = spread / 2;
        let bid = w.mid - half;
        let ask = if crossed {
            bid - (spread - 1) // locked (spread 1) or crossed
        } else {
            bid + spread
        };
        GenQuote {
            ts_ns: ts,
            symbol: s,
            bid,
            ask: ask.max(1),
            decimals: w.decimals,
            bid_qty,
            ask_qty,
        }
    }

    /// The name of symbol `i` (as [`GenQuote::symbol`] gives it).
    pub fn name(&self, i: usize) -> &str {
        &self.walks[i].name
    }

    /// Appends the next tick line (without a newline) to `out`; returns its
    /// `ts_ns`.
    pub fn next_into(&mut self, out: &mut Vec<u8>) -> u64 {
        let q = self.next_quote();
        let mut num = itoa::Buffer::new();
        out.extend_from_slice(num.format(q.ts_ns).as_bytes());
        out.push(b',');
        out.extend_from_slice(self.walks[q.symbol].name.as_bytes());
        out.push(b',');
        push_price(out, q.bid, q.decimals);
        out.push(b',');
        push_price(out, q.ask, q.decimals);
        out.push(b',');
        out.extend_from_slice(num.format(q.bid_qty).as_bytes());
        out.push(b',');
        out.extend_from_slice(num.format(q.ask_qty).as_bytes());
        q.ts_ns
    }

    /// Source time of the next tick relative to `start_ns`.
    pub fn elapsed_ns(&self) -> u64 {
        self.t_ns as u64
    }
}

/// Writes `mantissa × 10^-decimals` with exactly `decimals` decimals.
fn push_price(out: &mut Vec<u8>, mantissa: i64, decimals: u32) {
    let scale = 10i64.pow(decimals);
    let mut num = itoa::Buffer::new();
    out.extend_from_slice(num.format(mantissa / scale).as_bytes());
    out.push(b'.');
    let frac = num.format(mantissa % scale);
    for _ in frac.len()..decimals as usize {
        out.push(b'0');
    }
    out.extend_from_slice(frac.as_bytes());
}

/// Runs the subcommand.
pub fn run(args: &GenArgs) -> Result<(), Failure> {
    let spec = GenSpec::from_args(args)?;
    let limit = match (args.ticks, args.duration) {
        (Some(n), _) => Limit::Ticks(n),
        (None, Some(d)) => Limit::Duration(d.as_nanos() as u64),
        (None, None) => Limit::Ticks(100_000),
    };
    let (sink, name): (Box<dyn Write>, String) = match &args.out {
        Some(p) if p.as_os_str() != "-" => (
            Box::new(
                std::fs::File::create(p)
                    .map_err(|e| Failure::Runtime(format!("cannot create {}: {e}", p.display())))?,
            ),
            p.display().to_string(),
        ),
        _ => (Box::new(std::io::stdout().lock()), "standard output".into()),
    };
    let n = if args.dbn {
        super::gen_dbn::write_dbn(&spec, limit, sink)
    } else {
        write_file(&spec, limit, sink)
    }
    .map_err(|e| Failure::Runtime(format!("cannot write {name}: {e}")))?;
    if args.out.is_some() {
        eprintln!(
            "gen: wrote {n} ticks over {} symbols to {name}",
            spec.symbols
        );
    }
    Ok(())
}

/// How many ticks to write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// Exactly this many.
    Ticks(u64),
    /// Every tick whose source time is within this many ns of the start.
    Duration(u64),
}

impl Limit {
    /// True once `n` ticks were written, or the generator's source time
    /// (`elapsed_ns` since its start) is past the duration.
    pub fn reached(self, n: u64, elapsed_ns: u64) -> bool {
        match self {
            Limit::Ticks(max) => n >= max,
            Limit::Duration(ns) => elapsed_ns >= ns,
        }
    }
}

/// Writes the header and the ticks of `spec` up to `limit`; returns the tick count.
///
/// # Errors
/// The sink's I/O error.
pub fn write_file(spec: &GenSpec, limit: Limit, sink: impl Write) -> std::io::Result<u64> {
    let mut out = std::io::BufWriter::with_capacity(256 * 1024, sink);
    out.write_all(HEADER.as_bytes())?;
    out.write_all(b"\n")?;
    let mut g = TickGen::new(spec);
    let mut line = Vec::with_capacity(128);
    let mut n = 0u64;
    while !limit.reached(n, g.elapsed_ns()) {
        line.clear();
        g.next_into(&mut line);
        line.push(b'\n');
        out.write_all(&line)?;
        n += 1;
    }
    out.flush()?;
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn symbol_names_are_distinct_pairs() {
        assert_eq!(symbol_name(0), "EURUSD");
        assert_eq!(symbol_name(1), "EURJPY");
        assert_eq!(symbol_name(29), "USDEUR");
        let names: std::collections::HashSet<String> = (0..2_000).map(symbol_name).collect();
        assert_eq!(names.len(), 2_000);
        assert_eq!(symbol_name(870), "EURUSD.1");
    }

    #[test]
    fn prices_keep_their_decimals() {
        let mut v = Vec::new();
        push_price(&mut v, 108_512, 5);
        v.push(b' ');
        push_price(&mut v, 1_505, 5);
        v.push(b' ');
        push_price(&mut v, 150_123, 3);
        assert_eq!(v, b"1.08512 0.01505 150.123");
    }
}
