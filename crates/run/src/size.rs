//! Sizes as users write them: `64M`, `1G`, `1.5G`, `4096`.

/// A size that is not one.
#[derive(Debug, thiserror::Error)]
#[error("{0:?} is not a size (bytes, or a number with K, M, G or T, e.g. 512M or 1.5G)")]
pub struct SizeError(pub String);

/// Parses a size: bytes, or a number (fractions allowed) with K, M, G or T
/// (powers of 1024, an optional `B` or `iB` after the unit).
pub fn parse_size(text: &str) -> Result<u64, SizeError> {
    let bad = || SizeError(text.to_string());
    let t = text.trim();
    let t = t
        .strip_suffix("iB")
        .or_else(|| t.strip_suffix('B'))
        .unwrap_or(t);
    let (number, unit) = match t.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => (&t[..i], c.to_ascii_uppercase()),
        _ => (t, ' '),
    };
    let shift = match unit {
        ' ' => 0,
        'K' => 10,
        'M' => 20,
        'G' => 30,
        'T' => 40,
        _ => return Err(bad()),
    };
    if let Ok(n) = number.parse::<u64>() {
        return n.checked_mul(1 << shift).ok_or_else(bad);
    }
    let x: f64 = number.parse().map_err(|_| bad())?;
    let bytes = x * (1u64 << shift) as f64;
    if !(0.0..1.8e19).contains(&bytes) {
        return Err(bad());
    }
    Ok(bytes as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_sizes_parse_with_units_and_fractions() {
        assert_eq!(parse_size("4096").unwrap(), 4096);
        assert_eq!(parse_size("64M").unwrap(), 64 << 20);
        assert_eq!(parse_size("1.5G").unwrap(), 3 << 29);
        assert_eq!(parse_size("2GiB").unwrap(), 2 << 30);
        assert_eq!(parse_size("0").unwrap(), 0);
    }

    #[test]
    fn test_non_sizes_are_refused() {
        for s in ["", "M", "12Q", "-1G", "1e400", "x5"] {
            assert!(parse_size(s).is_err(), "{s}");
        }
    }
}
