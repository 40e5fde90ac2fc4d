//! Durations as the command line writes them: `0`, `250us`, `1ms`, `2s`.

use std::time::Duration;

/// Why a duration was not understood.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DurationError {
    /// Digits were missing or malformed (`ms`, `1.5ms`, `x`).
    #[error("{0:?}: expected a whole number and a unit (ns, us, ms, s), or 0")]
    Number(String),
    /// A non-zero number had no unit, or an unknown one.
    #[error("{0:?}: unknown or missing unit (expected ns, us, ms or s)")]
    Unit(String),
    /// Too large to represent.
    #[error("{0:?}: too long")]
    Overflow(String),
}

/// Parses `0` or a whole number followed by `ns`, `us`, `ms` or `s`.
pub fn parse_duration(text: &str) -> Result<Duration, DurationError> {
    let digits = text.bytes().take_while(u8::is_ascii_digit).count();
    let (number, unit) = text.split_at(digits);
    if number.is_empty() {
        return Err(DurationError::Number(text.into()));
    }
    let n: u64 = number
        .parse()
        .map_err(|_| DurationError::Overflow(text.into()))?;
    let per_unit: u64 = match unit {
        "" if n == 0 => 0,
        "ns" => 1,
        "us" | "µs" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        _ if unit.starts_with(['.', ',']) => return Err(DurationError::Number(text.into())),
        _ => return Err(DurationError::Unit(text.into())),
    };
    let nanos = n
        .checked_mul(per_unit)
        .ok_or_else(|| DurationError::Overflow(text.into()))?;
    Ok(Duration::from_nanos(nanos))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units() {
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        assert_eq!(parse_duration("0us"), Ok(Duration::ZERO));
        assert_eq!(parse_duration("750ns"), Ok(Duration::from_nanos(750)));
        assert_eq!(parse_duration("200us"), Ok(Duration::from_micros(200)));
        assert_eq!(parse_duration("1ms"), Ok(Duration::from_millis(1)));
        assert_eq!(parse_duration("2s"), Ok(Duration::from_secs(2)));
    }

    #[test]
    fn rejects() {
        for bad in ["", "ms", "100", "1.5ms", "-1ms", "10 ms", "3h", "x"] {
            assert!(parse_duration(bad).is_err(), "{bad:?} accepted");
        }
        assert!(matches!(
            parse_duration("99999999999999999999s"),
            Err(DurationError::Overflow(_))
        ));
    }
}
