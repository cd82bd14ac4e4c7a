//! The fixed-point decimal every price and quantity of a tick is held in.
//!
//! Prices must leave the engine numerically identical to how they came in, so
//! a price is never a float: it is a `mantissa` and a decimal `scale`
//! (`1.08512` is `108512 × 10⁻⁵`). Keeping the scale also keeps the trailing
//! zeros the venue sent (`1.38700` re-encodes as `1.38700`).

/// An unsigned fixed-point decimal: `mantissa × 10^(-scale)`.
///
/// Invariant: `scale <= Decimal::MAX_SCALE` and the value was produced from at
/// most `Decimal::MAX_DIGITS` significant digits, so it always fits a `u64`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct Decimal {
    /// All the digits, without the decimal point.
    pub mantissa: u64,
    /// How many of those digits stand after the decimal point.
    pub scale: u8,
}

impl Decimal {
    /// Most digits accepted in one number (all of them fit a `u64`).
    pub const MAX_DIGITS: usize = 19;
    /// Most digits accepted after the decimal point.
    pub const MAX_SCALE: u8 = 18;

    /// Builds a decimal from its parts.
    pub const fn new(mantissa: u64, scale: u8) -> Self {
        Decimal { mantissa, scale }
    }

    /// True when the value is zero, whatever its scale.
    pub const fn is_zero(&self) -> bool {
        self.mantissa == 0
    }

    /// Appends the canonical text of the value: the mantissa's digits with a
    /// point `scale` digits from the right, and a leading `0` when the value is
    /// below one (`12`, scale 5 → `0.00012`). Never allocates when `out` has
    /// room for 40 more bytes.
    pub fn append_to(&self, out: &mut Vec<u8>) {
        let mut buf = itoa::Buffer::new();
        let digits = buf.format(self.mantissa).as_bytes();
        let scale = self.scale as usize;
        if scale == 0 {
            out.extend_from_slice(digits);
            return;
        }
        if digits.len() > scale {
            let int_len = digits.len() - scale;
            out.extend_from_slice(&digits[..int_len]);
            out.push(b'.');
            out.extend_from_slice(&digits[int_len..]);
        } else {
            out.extend_from_slice(b"0.");
            for _ in digits.len()..scale {
                out.push(b'0');
            }
            out.extend_from_slice(digits);
        }
    }

    /// Compares two decimals by value (`1.50` equals `1.5`).
    #[inline]
    pub fn cmp_value(&self, other: &Decimal) -> std::cmp::Ordering {
        if self.scale == other.scale {
            return self.mantissa.cmp(&other.mantissa);
        }
        let (a, b) = (self.mantissa as u128, other.mantissa as u128);
        let (sa, sb) = (self.scale as u32, other.scale as u32);
        if sa >= sb {
            a.cmp(&(b * 10u128.pow(sa - sb)))
        } else {
            (a * 10u128.pow(sb - sa)).cmp(&b)
        }
    }
}

impl std::fmt::Display for Decimal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut v = Vec::with_capacity(24);
        self.append_to(&mut v);
        f.write_str(std::str::from_utf8(&v).expect("decimal text is ASCII"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(d: Decimal) -> String {
        d.to_string()
    }

    #[test]
    fn append_keeps_scale_and_leading_zero() {
        assert_eq!(text(Decimal::new(138700, 5)), "1.38700");
        assert_eq!(text(Decimal::new(12, 5)), "0.00012");
        assert_eq!(text(Decimal::new(0, 2)), "0.00");
        assert_eq!(text(Decimal::new(1000000, 0)), "1000000");
        assert_eq!(text(Decimal::new(5, 1)), "0.5");
        assert_eq!(text(Decimal::new(u64::MAX, 18)), "18.446744073709551615");
    }

    #[test]
    fn cmp_value_ignores_scale() {
        use std::cmp::Ordering::*;
        assert_eq!(Decimal::new(150, 2).cmp_value(&Decimal::new(15, 1)), Equal);
        assert_eq!(Decimal::new(1, 0).cmp_value(&Decimal::new(999, 3)), Greater);
        assert_eq!(Decimal::new(0, 0).cmp_value(&Decimal::new(1, 18)), Less);
    }
}
