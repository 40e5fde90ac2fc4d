//! Sizes given as integers or as strings with units (`"40MB"`, `"1.5 GiB"`).

use thiserror::Error;

/// Why a size string was refused.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum SizeError {
    /// Nothing but blanks.
    #[error("{what}: an empty string is not a size")]
    Empty {
        /// The argument.
        what: &'static str,
    },
    /// Not a number followed by a known unit.
    #[error(
        "{what}: `{text}` is not a size (a number of bytes, optionally with a unit: \
         B, K/KB/KiB, M/MB/MiB, G/GB/GiB, T/TB/TiB, all powers of 1024)"
    )]
    Malformed {
        /// The argument.
        what: &'static str,
        /// The text given.
        text: String,
    },
    /// A fraction of a byte, a negative size or one beyond the address space.
    #[error("{what}: `{text}` is not a whole number of bytes that fits in memory")]
    OutOfRange {
        /// The argument.
        what: &'static str,
        /// The text given.
        text: String,
    },
}

/// Parses a size: digits (a decimal fraction allowed) and an optional unit,
/// case-insensitive, blanks allowed between them. Every unit is a power of
/// 1024 (`MB` is a MiB, as in the CLI's `k/M/G` suffixes). `what` names the
/// argument in errors.
pub fn parse_size(text: &str, what: &'static str) -> Result<usize, SizeError> {
    let t = text.trim();
    if t.is_empty() {
        return Err(SizeError::Empty { what });
    }
    let malformed = || SizeError::Malformed {
        what,
        text: text.to_string(),
    };
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '_'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        _ => return Err(malformed()),
    };
    let number = number.replace('_', "");
    if number.is_empty() || number.starts_with('.') && number.len() == 1 {
        return Err(malformed());
    }
    let out_of_range = || SizeError::OutOfRange {
        what,
        text: text.to_string(),
    };
    let (whole, frac) = number.split_once('.').unwrap_or((&number, ""));
    if frac.contains('.') {
        return Err(malformed());
    }
    let whole: u128 = if whole.is_empty() {
        0
    } else {
        whole.parse().map_err(|_| out_of_range())?
    };
    let mut bytes = whole.checked_shl(shift).ok_or_else(out_of_range)?;
    if !frac.is_empty() {
        // frac digits d: value d / 10^len; times 2^shift must be whole.
        let digits: u128 = frac.parse().map_err(|_| malformed())?;
        let scale = 10u128
            .checked_pow(frac.len() as u32)
            .ok_or_else(out_of_range)?;
        let scaled = digits.checked_shl(shift).ok_or_else(out_of_range)?;
        if scaled % scale != 0 {
            return Err(out_of_range());
        }
        bytes += scaled / scale;
    }
    usize::try_from(bytes)
        .ok()
        .filter(|&b| b <= isize::MAX as usize)
        .ok_or_else(out_of_range)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_units_are_powers_of_1024() {
        assert_eq!(parse_size("4096", "x"), Ok(4096));
        assert_eq!(parse_size("40MB", "x"), Ok(40 << 20));
        assert_eq!(parse_size("40 mib", "x"), Ok(40 << 20));
        assert_eq!(parse_size("4k", "x"), Ok(4096));
        assert_eq!(parse_size("1.5G", "x"), Ok(3 << 29));
        assert_eq!(parse_size("2TiB", "x"), Ok(2 << 40));
        assert_eq!(parse_size("1_000b", "x"), Ok(1000));
    }

    #[test]
    fn test_bad_sizes_name_the_argument() {
        let e = parse_size("40 parsecs", "budget").unwrap_err();
        assert!(matches!(e, SizeError::Malformed { what: "budget", .. }));
        assert!(e.to_string().starts_with("budget: `40 parsecs`"), "{e}");
        assert_eq!(
            parse_size("  ", "budget"),
            Err(SizeError::Empty { what: "budget" })
        );
        assert!(matches!(
            parse_size("0.3B", "len"),
            Err(SizeError::OutOfRange { .. })
        ));
        assert!(matches!(
            parse_size("99999999999T", "len"),
            Err(SizeError::OutOfRange { .. })
        ));
        assert!(matches!(
            parse_size("-4k", "len"),
            Err(SizeError::Malformed { .. })
        ));
        assert!(matches!(
            parse_size("1.2.3M", "len"),
            Err(SizeError::Malformed { .. })
        ));
    }
}
