//! Flag value parsers the tools share (clap `value_parser`s): a bad value is
//! refused by clap itself, so it prints one line and exits 2.

use std::time::Duration;

/// A duration that must be longer than zero (`--duration 0s` would end a
/// run before it starts, and is more likely a typo than an intent).
///
/// # Errors
/// The humantime reason for an unparsable value, or "must be longer than 0".
pub fn positive_duration(s: &str) -> Result<Duration, String> {
    let d =
        humantime::parse_duration(s).map_err(|e| format!("{e} (write it as 500ms, 10s, 2m)"))?;
    if d.is_zero() {
        return Err(format!("`{s}` is zero; the duration must be longer than 0"));
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::positive_duration;
    use std::time::Duration;

    #[test]
    fn zero_is_refused_and_positive_passes() {
        assert!(positive_duration("0s")
            .unwrap_err()
            .contains("longer than 0"));
        assert!(positive_duration("0")
            .unwrap_err()
            .contains("longer than 0"));
        assert!(positive_duration("banana").is_err());
        assert_eq!(positive_duration("1ms").unwrap(), Duration::from_millis(1));
    }
}
