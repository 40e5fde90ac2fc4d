//! Read-ahead windows as `pagepilot bench join --windows` names them (`KxD`), and what they
//! cost MRU: each window's frames are taken out of its resident set (docs/pager.md).

use std::fmt;
use std::str::FromStr;

use serde::Serialize;

/// An entry of `--windows` that is not `KxD` with 1 <= K <= 4096 pages and D <= 16.
#[derive(Debug, thiserror::Error)]
#[error("--windows {0:?}: expected KxD, k pages (1-4096) and D windows ahead (0-16), like 64x1")]
pub struct WindowError(String);

/// A read-ahead window setting: `pages` per window, `depth` windows kept ahead (0: synchronous).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Window {
    /// Pages per window (k).
    pub pages: usize,
    /// Windows in flight ahead of the one in use; 0 reads each window synchronously.
    pub depth: usize,
}

impl Window {
    /// Frames the windows keep outside an MRU policy's resident set: (depth + 1) * k.
    pub fn frames(&self) -> u64 {
        ((self.depth + 1) * self.pages) as u64
    }
}

impl FromStr for Window {
    type Err = WindowError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let bad = || WindowError(text.to_string());
        let (pages, depth) = text.split_once('x').ok_or_else(bad)?;
        let pages: usize = pages.trim().parse().map_err(|_| bad())?;
        let depth: usize = depth.trim().parse().map_err(|_| bad())?;
        if pages == 0 || pages > 4096 || depth > 16 {
            return Err(bad());
        }
        Ok(Window { pages, depth })
    }
}

impl fmt::Display for Window {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}x{}", self.pages, self.depth)
    }
}

/// MRU's page-ins when its read-ahead windows keep `w.frames()` frames outside its resident
/// set: O + (O - M + (depth + 1) * k) * (Loop - 1), capped at LRU's O * Loop.
pub fn mru_window_faults(o: u64, m: u64, loops: u64, w: Window) -> u64 {
    if o <= m {
        return o;
    }
    let per_pass = (o - m + w.frames()).min(o);
    o + per_pass * loops.saturating_sub(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_windows_parse_as_pages_x_depth_and_refuse_the_rest() {
        assert_eq!(
            "64x1".parse::<Window>().unwrap(),
            Window {
                pages: 64,
                depth: 1
            }
        );
        assert_eq!("52x0".parse::<Window>().unwrap().frames(), 52);
        assert_eq!(
            Window {
                pages: 24,
                depth: 1
            }
            .to_string(),
            "24x1"
        );
        for bad in ["64", "x1", "0x1", "64x", "64x17", "5000x1", "-1x1", "64*1"] {
            assert!(
                matches!(bad.parse::<Window>(), Err(WindowError(t)) if t == bad),
                "{bad} accepted"
            );
        }
    }

    #[test]
    fn test_mru_window_faults_add_the_windows_frames_to_each_pass() {
        // The paper's 60 MB / 40 MB join: one 24-page window ahead costs 48 pages a pass.
        let w = Window {
            pages: 24,
            depth: 1,
        };
        assert_eq!(
            mru_window_faults(15360, 10240, 64, w),
            15360 + (5120 + 48) * 63
        );
        // Demand paging (one page, synchronous): one page a pass over PF_m, the frame MRU-live
        // reads into.
        let one = Window { pages: 1, depth: 0 };
        assert_eq!(mru_window_faults(15360, 10240, 64, one), 15360 + 5121 * 63);
        // Windows as large as the budget make MRU fault like LRU, not more.
        let huge = Window {
            pages: 4096,
            depth: 16,
        };
        assert_eq!(mru_window_faults(15360, 10240, 64, huge), 15360 * 64);
        assert_eq!(mru_window_faults(5120, 10240, 64, w), 5120);
    }
}
