//! The order path's units: side, quantity in lots, prices and amounts.
//!
//! Spoken by the order gateway, the bridges, the fill thread and the tools,
//! so they live here, below all of them.
//!
//! All fixed-point integers, so cumulative values add up exactly and print
//! with the same digits every time:
//!
//! | type | unit | text |
//! |---|---|---|
//! | [`Lots`] | 0.01 lot | `1.25` (always 2 decimals) |
//! | [`Price`] | 0.00001 | `1.08512` (5 decimals) |
//! | [`Amount`] | 0.0000001 (lots × price) | `1.3564000` (7 decimals) |

use std::fmt;

/// Buy or sell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum Side {
    /// Buy.
    Buy,
    /// Sell.
    Sell,
}

impl Side {
    /// `BUY` or `SELL`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Side::Buy => "BUY",
            Side::Sell => "SELL",
        }
    }

    /// Parses `BUY`/`SELL` (any case).
    pub fn parse(s: &str) -> Option<Side> {
        if s.eq_ignore_ascii_case("buy") {
            Some(Side::Buy)
        } else if s.eq_ignore_ascii_case("sell") {
            Some(Side::Sell)
        } else {
            None
        }
    }
}

/// A quantity in hundredths of a lot (`Lots(1)` is 0.01 lot).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Lots(pub u64);

/// Why a quantity did not parse.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum LotsError {
    /// Not `digits` or `digits.digits`.
    #[error("not a decimal number")]
    NotDecimal,
    /// More than two decimals (the smallest quantity is 0.01 lot).
    #[error("at most 2 decimals (0.01 lot is the smallest step)")]
    TooPrecise,
    /// Zero or negative.
    #[error("must be positive")]
    NotPositive,
    /// Over [`Lots::MAX`].
    #[error("over the largest order (1000000 lots)")]
    TooLarge,
}

impl Lots {
    /// Largest quantity of one order: 1,000,000 lots.
    pub const MAX: Lots = Lots(100_000_000);

    /// Parses `1`, `0.01`, `2.5`; refuses signs, exponents, zero, more than
    /// two decimals and more than [`Lots::MAX`].
    ///
    /// # Errors
    /// The [`LotsError`] naming what is wrong.
    pub fn parse(s: &str) -> Result<Lots, LotsError> {
        if s.starts_with('-') {
            return Err(LotsError::NotPositive);
        }
        let (int, frac) = match s.split_once('.') {
            Some((i, f)) => (i, f),
            None => (s, ""),
        };
        let digits = |t: &str| t.bytes().all(|b| b.is_ascii_digit());
        if int.is_empty() || !digits(int) || !digits(frac) || (s.contains('.') && frac.is_empty()) {
            return Err(LotsError::NotDecimal);
        }
        let frac_trim = frac.trim_end_matches('0');
        if frac_trim.len() > 2 {
            return Err(LotsError::TooPrecise);
        }
        let int_v: u64 = if int.trim_start_matches('0').len() > 7 {
            return Err(LotsError::TooLarge);
        } else {
            int.parse().map_err(|_| LotsError::NotDecimal)?
        };
        let mut frac_v = 0u64;
        for (i, b) in frac_trim.bytes().enumerate() {
            frac_v += u64::from(b - b'0') * if i == 0 { 10 } else { 1 };
        }
        let v = int_v * 100 + frac_v;
        if v == 0 {
            return Err(LotsError::NotPositive);
        }
        if v > Lots::MAX.0 {
            return Err(LotsError::TooLarge);
        }
        Ok(Lots(v))
    }

    /// Hundredths of a lot.
    pub const fn hundredths(self) -> u64 {
        self.0
    }
}

/// As its text form (`"1.50"`), the way a flag gives it.
impl serde::Serialize for Lots {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl fmt::Display for Lots {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{:02}", self.0 / 100, self.0 % 100)
    }
}

/// A price in units of 0.00001.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Price(pub u64);

impl fmt::Display for Price {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{:05}", self.0 / 100_000, self.0 % 100_000)
    }
}

/// Lots × price in units of 0.0000001 (so it adds up exactly).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Amount(pub u64);

impl Amount {
    /// `lots × price`.
    pub fn of(lots: Lots, price: Price) -> Amount {
        Amount(lots.0.saturating_mul(price.0))
    }
}

impl fmt::Display for Amount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{:07}", self.0 / 10_000_000, self.0 % 10_000_000)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lots_parse_and_print() {
        for (s, v) in [
            ("1", 100),
            ("0.01", 1),
            ("2.5", 250),
            ("2.50", 250),
            ("007.10", 710),
        ] {
            assert_eq!(Lots::parse(s), Ok(Lots(v)), "{s}");
        }
        assert_eq!(Lots(250).to_string(), "2.50");
        assert_eq!(Lots::parse("0"), Err(LotsError::NotPositive));
        assert_eq!(Lots::parse("0.00"), Err(LotsError::NotPositive));
        assert_eq!(Lots::parse("-1"), Err(LotsError::NotPositive));
        assert_eq!(Lots::parse("0.001"), Err(LotsError::TooPrecise));
        assert_eq!(Lots::parse("1e3"), Err(LotsError::NotDecimal));
        assert_eq!(Lots::parse("1."), Err(LotsError::NotDecimal));
        assert_eq!(Lots::parse(".5"), Err(LotsError::NotDecimal));
        assert_eq!(Lots::parse("+1"), Err(LotsError::NotDecimal));
        assert_eq!(Lots::parse("1000001"), Err(LotsError::TooLarge));
        assert_eq!(
            Lots::parse("99999999999999999999"),
            Err(LotsError::TooLarge)
        );
        assert_eq!(Lots::parse("1000000"), Ok(Lots::MAX));
    }

    #[test]
    fn amounts_are_exact() {
        let a = Amount::of(Lots(150), Price(108_512));
        assert_eq!(a.to_string(), "1.6276800");
        assert_eq!(Price(108_512).to_string(), "1.08512");
        assert_eq!(Side::parse("sell"), Some(Side::Sell));
        assert_eq!(Side::parse("hold"), None);
    }
}
