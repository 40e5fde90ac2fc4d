//! libCacheSim's trace formats, so its public trace collections load:
//! `oracleGeneral` (binary records) and `txt` (one object id per line).
//! Each object id becomes one page number. [`write_oracle_general`] writes
//! `oracleGeneral` back, so libCacheSim can run pagepilot's traces.

use std::collections::HashMap;
use std::io::{BufRead, Read, Write};
use std::path::Path;

use super::sink::Batched;

use super::lines::{for_each_line, parse_hex, show};
use super::{Collapse, LoadOptions, Position, Trace, TraceError};

/// Bytes per `oracleGeneral` record: `u32` timestamp, `u64` object id,
/// `u32` object size, `i64` next access (virtual time), little-endian.
pub const ORACLE_GENERAL_RECORD: usize = 24;

/// Reads an `oracleGeneral` trace; only `collapse_repeats` of `options`
/// applies (object sizes and next-access times are not used).
pub fn read_oracle_general(
    mut input: impl Read,
    path: &Path,
    options: &LoadOptions,
) -> Result<Trace, TraceError> {
    const PER_CHUNK: usize = (1 << 20) / ORACLE_GENERAL_RECORD;
    let mut buf = vec![0u8; PER_CHUNK * ORACLE_GENERAL_RECORD];
    let mut sink = Collapse::new(Batched::new(Trace::new()), options.collapse_repeats);
    let mut offset = 0u64;
    loop {
        let got = super::binary::fill(&mut input, &mut buf).map_err(|e| TraceError::io(path, e))?;
        let whole = got - got % ORACLE_GENERAL_RECORD;
        for rec in buf[..whole].chunks_exact(ORACLE_GENERAL_RECORD) {
            let id = u64::from_le_bytes(rec[4..12].try_into().expect("8 bytes"));
            let _ = sink.reference(id, false);
        }
        if whole != got {
            let at = offset + whole as u64;
            return Err(TraceError::malformed(
                path,
                Position::Offset(at),
                format!(
                    "last record cut short: {} of {ORACLE_GENERAL_RECORD} bytes",
                    got - whole
                ),
            ));
        }
        offset += got as u64;
        if got < buf.len() {
            break;
        }
    }
    Ok(sink.finish().map(Batched::into_trace).unwrap_or_default())
}

/// Writes `trace` as `oracleGeneral` records, one per reference: the
/// reference's index as its timestamp (saturating at `u32::MAX`), the page
/// number as the object id, an object size of 1 (one object per page, so a
/// libCacheSim cache of `n` bytes holds `n` pages), and the index of the
/// page's next reference (-1 if none), which libCacheSim's Belady needs.
pub fn write_oracle_general(trace: &Trace, out: &mut impl Write) -> std::io::Result<()> {
    let mut next = vec![-1i64; trace.distinct()];
    let mut next_use = vec![0i64; trace.len()];
    for (i, &slot) in trace.refs.iter().enumerate().rev() {
        next_use[i] = next[slot as usize];
        next[slot as usize] = i as i64;
    }
    let mut rec = [0u8; ORACLE_GENERAL_RECORD];
    for (i, &slot) in trace.refs.iter().enumerate() {
        let time = u32::try_from(i).unwrap_or(u32::MAX);
        rec[0..4].copy_from_slice(&time.to_le_bytes());
        rec[4..12].copy_from_slice(&trace.pages[slot as usize].to_le_bytes());
        rec[12..16].copy_from_slice(&1u32.to_le_bytes());
        rec[16..24].copy_from_slice(&next_use[i].to_le_bytes());
        out.write_all(&rec)?;
    }
    Ok(())
}

/// Reads a libCacheSim `txt` trace. Like libCacheSim, ids are numbers
/// (C `strtoull` base 0: decimal, `0x` hex, leading-`0` octal) if the first
/// id is one, else strings, numbered in order of first appearance. Only
/// `collapse_repeats` of `options` applies.
pub fn read_txt(
    input: impl BufRead,
    path: &Path,
    options: &LoadOptions,
) -> Result<Trace, TraceError> {
    let mut sink = Collapse::new(Batched::new(Trace::new()), options.collapse_repeats);
    let mut numeric: Option<bool> = None;
    let mut names: HashMap<Box<[u8]>, u64> = HashMap::new();
    for_each_line(input, path, |_, line| {
        let id = line.trim_ascii();
        if id.is_empty() {
            return Ok(());
        }
        let is_num = *numeric.get_or_insert_with(|| parse_c_number(id).is_some());
        let obj = if is_num {
            parse_c_number(id).ok_or_else(|| {
                format!(
                    "expected a numeric object id (the first id was numeric), found `{}`",
                    show(id)
                )
            })?
        } else {
            let next = names.len() as u64;
            match names.get(id) {
                Some(&n) => n,
                None => {
                    names.insert(id.into(), next);
                    next
                }
            }
        };
        let _ = sink.reference(obj, false);
        Ok(())
    })?;
    Ok(sink.finish().map(Batched::into_trace).unwrap_or_default())
}

/// An unsigned number as C's `strtoull(s, _, 0)` reads it, but only if it
/// makes up all of `s`.
fn parse_c_number(s: &[u8]) -> Option<u64> {
    let s = s.strip_prefix(b"+").unwrap_or(s);
    match s {
        [b'0', b'x' | b'X', hex @ ..] => parse_hex(hex),
        [b'0', oct @ ..] if !oct.is_empty() => {
            let mut v: u64 = 0;
            for &b in oct {
                let d = b.wrapping_sub(b'0');
                if d > 7 {
                    return None;
                }
                v = v.checked_mul(8)?.checked_add(u64::from(d))?;
            }
            Some(v)
        }
        _ => super::lines::parse_dec(s),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_oracle_general_round_trips_pages_with_next_uses() {
        let trace = Trace::from_pages([7, 3, 7, u64::MAX, 3, 7]);
        let mut bytes = Vec::new();
        write_oracle_general(&trace, &mut bytes).unwrap();
        assert_eq!(bytes.len(), 6 * ORACLE_GENERAL_RECORD);
        let field = |i: usize, at: usize| {
            i64::from_le_bytes(bytes[i * 24 + at..i * 24 + at + 8].try_into().unwrap())
        };
        let next: Vec<i64> = (0..6).map(|i| field(i, 16)).collect();
        assert_eq!(next, [2, 4, 5, -1, -1, -1]);
        assert_eq!(
            u32::from_le_bytes(bytes[24 * 5 + 12..24 * 5 + 16].try_into().unwrap()),
            1
        );
        let back =
            read_oracle_general(&bytes[..], Path::new("t"), &LoadOptions::default()).unwrap();
        assert_eq!(
            back.vpns().collect::<Vec<_>>(),
            trace.vpns().collect::<Vec<_>>()
        );
        assert_eq!(back.refs, trace.refs);
    }

    #[test]
    fn test_c_numbers_follow_strtoull_base_zero() {
        assert_eq!(parse_c_number(b"10"), Some(10));
        assert_eq!(parse_c_number(b"0x10"), Some(16));
        assert_eq!(parse_c_number(b"010"), Some(8));
        assert_eq!(parse_c_number(b"0"), Some(0));
        assert_eq!(parse_c_number(b"09"), None);
        assert_eq!(parse_c_number(b"abc"), None);
    }
}
