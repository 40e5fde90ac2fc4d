//! The key layout: one key per page, the pages of an aligned window of
//! pages under one Redis Cluster hash tag (one slot, so one node), so that
//! a window is read with one `MGET` and written with one `MSET`; and a
//! metadata key per dataspace.
//!
//! ```text
//! pp:{<name>}:meta         "pagepilot-far 2 len=<bytes> window=<pages>[ wait=<replicas>/<ms>]"
//! pp:{<name>}:written      bitmap: bit w set once window w was written
//! pp:{<name>:<w>}:<page>   the page's 4096 bytes, w = page / window
//! ```
//!
//! Dataspaces made before the bitmap (metadata "pagepilot-far 1") are
//! read as they always were: every page asked of the server.

use std::time::Duration;

use crate::error::ConfigError;
use crate::link::ReplicaWait;

/// Longest dataspace name, bytes.
pub const MAX_NAME: usize = 128;
/// Largest dataspace, bytes (1 TiB: 2^28 pages, as many keys).
pub const MAX_LEN: u64 = 1 << 40;
/// Largest window of pages under one hash tag.
pub const MAX_WINDOW: usize = 1024;
/// The default window: 64 pages (256 KiB) per hash tag.
pub const DEFAULT_WINDOW: usize = 64;

/// What the metadata value starts with: with version 2 the dataspace
/// records its written windows ([`written_key`]).
const META_MAGIC: &str = "pagepilot-far 2";
/// The metadata of dataspaces that do not record their written windows.
const META_MAGIC_V1: &str = "pagepilot-far 1";

/// Checks a dataspace name: 1 to [`MAX_NAME`] bytes of ASCII letters,
/// digits, `.`, `_` and `-` (no braces or colons: they would break the
/// hash tags).
pub fn check_name(name: &str) -> Result<(), ConfigError> {
    let bad = |why: &'static str| ConfigError::BadName {
        name: name.to_owned(),
        why,
    };
    if name.is_empty() {
        return Err(bad("it is empty"));
    }
    if name.len() > MAX_NAME {
        return Err(bad("it is longer than 128 bytes"));
    }
    if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
    {
        return Err(bad(
            "only ASCII letters, digits, '.', '_' and '-' are allowed",
        ));
    }
    Ok(())
}

/// Checks a window size: 1 to [`MAX_WINDOW`] pages.
pub fn check_window(window: usize) -> Result<(), ConfigError> {
    if (1..=MAX_WINDOW).contains(&window) {
        Ok(())
    } else {
        Err(ConfigError::BadWindow(window))
    }
}

/// The key of page `page` of dataspace `name` laid out in windows of
/// `window` pages.
pub fn page_key(name: &str, window: usize, page: usize) -> String {
    format!("pp:{{{name}:{}}}:{page}", page / window)
}

/// The metadata key of dataspace `name`.
pub fn meta_key(name: &str) -> String {
    format!("pp:{{{name}}}:meta")
}

/// The key of the bitmap of windows ever written of dataspace `name` (the
/// metadata's hash tag: read with it in one round trip).
pub fn written_key(name: &str) -> String {
    format!("pp:{{{name}}}:written")
}

/// A dataspace's metadata.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Meta {
    /// Its length, bytes.
    pub len: u64,
    /// Pages per hash tag.
    pub window: usize,
    /// Whether its written windows are recorded ([`written_key`]); false
    /// for dataspaces made before they were.
    pub tracks_written: bool,
    /// Replicas every write to it waits for, and for how long per attempt
    /// (whoever opens it), if any.
    pub wait: Option<ReplicaWait>,
}

impl Meta {
    /// The metadata value.
    pub fn encode(&self) -> String {
        let magic = if self.tracks_written {
            META_MAGIC
        } else {
            META_MAGIC_V1
        };
        let mut v = format!("{magic} len={} window={}", self.len, self.window);
        if let Some(w) = self.wait {
            v += &format!(" wait={}/{}", w.replicas, w.timeout.as_millis());
        }
        v
    }

    /// Parses a metadata value; `None` if it is not one this crate wrote
    /// or out of bounds.
    pub fn decode(value: &[u8]) -> Option<Meta> {
        let s = std::str::from_utf8(value).ok()?;
        let (rest, tracks_written) = match s.strip_prefix(META_MAGIC) {
            Some(rest) => (rest, true),
            None => (s.strip_prefix(META_MAGIC_V1)?, false),
        };
        let mut len = None;
        let mut window = None;
        let mut wait = None;
        for field in rest.split_ascii_whitespace() {
            match field.split_once('=')? {
                ("len", v) => len = Some(v.parse::<u64>().ok()?),
                ("window", v) => window = Some(v.parse::<usize>().ok()?),
                ("wait", v) if tracks_written => {
                    let (replicas, ms) = v.split_once('/')?;
                    wait = Some(ReplicaWait {
                        replicas: replicas.parse().ok()?,
                        timeout: Duration::from_millis(ms.parse().ok()?),
                    });
                }
                _ => return None,
            }
        }
        let meta = Meta {
            len: len?,
            window: window?,
            tracks_written,
            wait,
        };
        let ok = (1..=MAX_LEN).contains(&meta.len)
            && check_window(meta.window).is_ok()
            && meta.wait.is_none_or(|w| w.replicas > 0);
        ok.then_some(meta)
    }
}

/// The window-aligned pieces of pages `first..end`: (first page, pages).
pub fn pieces(first: usize, end: usize, window: usize) -> impl Iterator<Item = (usize, usize)> {
    let mut at = first;
    std::iter::from_fn(move || {
        if at >= end {
            return None;
        }
        let until = ((at / window + 1) * window).min(end);
        let piece = (at, until - at);
        at = until;
        Some(piece)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_pages_of_a_window_share_a_hash_tag_and_the_next_window_does_not() {
        assert_eq!(page_key("db", 64, 0), "pp:{db:0}:0");
        assert_eq!(page_key("db", 64, 63), "pp:{db:0}:63");
        assert_eq!(page_key("db", 64, 64), "pp:{db:1}:64");
        assert_eq!(meta_key("db"), "pp:{db}:meta");
        assert_eq!(written_key("db"), "pp:{db}:written");
    }

    #[test]
    fn test_pieces_split_at_window_boundaries() {
        let p: Vec<_> = pieces(60, 200, 64).collect();
        assert_eq!(p, vec![(60, 4), (64, 64), (128, 64), (192, 8)]);
        assert_eq!(pieces(5, 5, 64).count(), 0);
    }

    #[test]
    fn test_names_with_tag_characters_or_too_long_are_refused() {
        assert!(check_name("a-b_c.1").is_ok());
        for bad in ["", "a{b", "a}b", "a:b", "a b", "é"] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
        assert!(check_name(&"x".repeat(129)).is_err());
    }

    #[test]
    fn test_meta_round_trips_and_garbage_is_refused() {
        let waited = Some(ReplicaWait {
            replicas: 2,
            timeout: Duration::from_millis(250),
        });
        for (tracks_written, wait) in [(true, None), (false, None), (true, waited)] {
            let m = Meta {
                len: 12345,
                window: 64,
                tracks_written,
                wait,
            };
            assert_eq!(Meta::decode(m.encode().as_bytes()), Some(m));
        }
        assert_eq!(
            Meta::decode(b"pagepilot-far 2 len=10 window=64 wait=1/500").and_then(|m| m.wait),
            Some(ReplicaWait {
                replicas: 1,
                timeout: Duration::from_millis(500)
            })
        );
        let old = Meta::decode(b"pagepilot-far 1 len=10 window=64").expect("version 1");
        assert!(!old.tracks_written);
        for bad in [
            &b"hello"[..],
            b"pagepilot-far 1 len=0 window=64",
            b"pagepilot-far 1 len=10 window=0",
            b"pagepilot-far 1 len=10",
            b"pagepilot-far 1 len=10 window=64 x=1",
            b"pagepilot-far 1 len=99999999999999999 window=64",
            b"pagepilot-far 2 len=10 window=64 wait=0/500",
            b"pagepilot-far 2 len=10 window=64 wait=1",
            b"pagepilot-far 1 len=10 window=64 wait=1/500",
        ] {
            assert_eq!(
                Meta::decode(bad),
                None,
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }
}
