//! `--symbol-map FILE`: renames of the symbols a vendor file names, and
//! the rule for a symbol the engine takes.
//!
//! The file: one rename a line, `FROM,TO`; blank lines and lines starting
//! with `#` are skipped. `FROM` is the symbol as the replay file's own
//! symbology gives it (a DBN raw symbol such as `ESM4`, or the instrument
//! id in decimal when the file maps none; a Tardis `exchange:symbol` such
//! as `binance:BTCUSDT`). Symbols the file does not name pass unchanged.

use std::path::Path;

use rustc_hash::FxHashMap;

use tickfan::error::Failure;

/// Longest symbol the feed takes (`tickfan::feed::parse`), in bytes.
pub const MAX_SYMBOL_LEN: usize = 24;

/// Whether the feed takes `s` as a symbol: 1–24 bytes of printable ASCII
/// (`0x21..=0x7E`) other than `,` (see `tickfan::feed::parse::parse_line`).
pub fn valid_symbol(s: &[u8]) -> bool {
    !s.is_empty()
        && s.len() <= MAX_SYMBOL_LEN
        && s.iter().all(|&b| (0x21..=0x7E).contains(&b) && b != b',')
}

/// Renames, file symbol → sent symbol. Read once at start, then only read.
#[derive(Debug, Clone, Default)]
pub struct SymbolMap {
    renames: FxHashMap<Vec<u8>, Vec<u8>>,
}

impl SymbolMap {
    /// Reads `path` (see the module docs).
    ///
    /// # Errors
    /// The file cannot be read; a line is not `FROM,TO`; a `TO` the feed
    /// would not take; a `FROM` given twice. Usage errors naming the line.
    pub fn load(path: &Path) -> Result<SymbolMap, Failure> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            Failure::Usage(format!("--symbol-map: cannot read {}: {e}", path.display()))
        })?;
        Self::parse(&text).map_err(|(n, why)| {
            Failure::Usage(format!("--symbol-map {}:{n}: {why}", path.display()))
        })
    }

    /// Parses the text of a symbol map.
    ///
    /// # Errors
    /// `(line number, reason)` of the first bad line.
    pub fn parse(text: &str) -> Result<SymbolMap, (usize, String)> {
        let mut renames = FxHashMap::default();
        for (i, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let Some((from, to)) = line.split_once(',') else {
                return Err((i + 1, "expected FROM,TO".into()));
            };
            let (from, to) = (from.trim(), to.trim());
            if from.is_empty() {
                return Err((i + 1, "FROM is empty".into()));
            }
            if !valid_symbol(to.as_bytes()) {
                return Err((
                    i + 1,
                    format!("`{to}` is not a symbol the feed takes (1-24 printable ASCII bytes, no comma)"),
                ));
            }
            if renames
                .insert(from.as_bytes().to_vec(), to.as_bytes().to_vec())
                .is_some()
            {
                return Err((i + 1, format!("`{from}` is renamed twice")));
            }
        }
        Ok(SymbolMap { renames })
    }

    /// The symbol to send for the file's `symbol`.
    pub fn rename<'a>(&'a self, symbol: &'a [u8]) -> &'a [u8] {
        if self.renames.is_empty() {
            return symbol;
        }
        self.renames.get(symbol).map_or(symbol, Vec::as_slice)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renames_named_symbols_and_passes_the_others() {
        let m = SymbolMap::parse("# ids of the sample\n5482,ESM4\n\nbinance:BTCUSDT, BTCUSDT\n")
            .unwrap();
        assert_eq!(m.rename(b"5482"), b"ESM4");
        assert_eq!(m.rename(b"binance:BTCUSDT"), b"BTCUSDT");
        assert_eq!(m.rename(b"ESZ4"), b"ESZ4");
    }

    #[test]
    fn a_bad_line_is_named() {
        assert_eq!(SymbolMap::parse("a,b\nnope\n").unwrap_err().0, 2);
        assert!(SymbolMap::parse("a,has space")
            .unwrap_err()
            .1
            .contains("not a symbol"));
        assert!(SymbolMap::parse("a,b\na,c")
            .unwrap_err()
            .1
            .contains("twice"));
    }

    #[test]
    fn the_feed_s_symbol_rule() {
        assert!(valid_symbol(b"binance-futures:BTCUSDT"));
        assert!(!valid_symbol(b""));
        assert!(!valid_symbol(b"SPY   240621C00500000"));
        assert!(!valid_symbol(&[b'A'; 25]));
        assert!(!valid_symbol(b"A,B"));
    }
}
