//! The read-ahead a region gets when its options leave it to the pager:
//! windows sized from what the pager knows and the kernel does not, the
//! policy in force, the region's size and its budget (docs/pager.md,
//! "Clustered reads": under an MRU-like policy every frame a window holds
//! is taken from the resident set, and costs one page-in per pass of a
//! cyclic scan).

/// A read-ahead setting: windows of up to `pages`, `depth` of them read
/// ahead asynchronously (0: each window read when it is faulted on).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    /// Largest window, pages.
    pub pages: usize,
    /// Windows kept ahead of the one in use (0: synchronous read-ahead).
    pub depth: usize,
}

/// The share of a cyclic scan's unavoidable page-ins (the pages beyond the
/// budget, each pass) that MRU-like policies may spend on read-ahead frames.
const SPARE_SHARE: usize = 20;

/// SEQ's largest window. Larger windows cost SEQ its sequences: its
/// CLOCK fallback chooses more victims, and every page it clears comes back
/// as a minor fault (HiPEC's 60 MB join under 40 MB, 64 loops: 40 855 minor
/// faults at 24 pages, 49 360 at 32, 119 847 at 64, 225 734 at 128), each a
/// fault event for the handler threads. At 32 the defaults match the best
/// tuned window (docs/results.md, 2026-11-25 evening session).
const SEQ_WINDOW: usize = 32;

/// Whether the live policy named `policy` keeps the pages it read last
/// (MRU, SEQ): read-ahead frames come out of its resident set.
pub fn mru_like(policy: &str) -> bool {
    policy.starts_with("mru") || policy.starts_with("seq")
}

/// The default window of a region of `pages` pages under `frames` frames
/// and the live policy named `policy` (`program`: a policy program).
///
/// - MRU-like policies (MRU, SEQ) over a region larger than their budget
///   keep the pages they read last: the windows' (depth + 1) * k frames
///   come out of that set and cost as many page-ins per pass, so one window
///   ahead and k = (pages - frames) / 40 keep the page-ins within 5% of
///   PF_m (a 60 MB table under 40 MB: 128 pages, the best tuned join row).
///   SEQ's windows stay within [`SEQ_WINDOW`] pages.
/// - Other built-in policies page in every pass anyway: 128 pages, 4 ahead.
/// - Policy programs keep their own queues of the pages they were told
///   about; pages read ahead behind them would be victims they cannot name
///   yet: synchronous windows of 16 pages, as before.
///
/// The windows in flight fit in a quarter of the budget, so that the rest
/// holds victims for several threads' streams at once.
pub fn window(policy: &str, program: bool, pages: usize, frames: usize) -> Window {
    let mru_like = mru_like(policy);
    let w = if program {
        Window {
            pages: 16,
            depth: 0,
        }
    } else if mru_like && pages > frames {
        let depth = 1;
        let spare = (pages - frames) / SPARE_SHARE;
        let most = if policy.starts_with("seq") {
            SEQ_WINDOW
        } else {
            1024
        };
        Window {
            pages: (spare / (depth + 1)).clamp(1, most),
            depth,
        }
    } else {
        Window {
            pages: 128,
            depth: 4,
        }
    };
    Window {
        pages: w.pages.min(frames / (4 * (w.depth + 1))).max(1),
        ..w
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_mru_windows_spend_at_most_a_twentieth_of_the_pages_beyond_the_budget() {
        // HiPEC's join: 60 MB outer table, 40 MB budget.
        assert_eq!(
            window("mru-live", false, 15360, 10240),
            Window {
                pages: 128,
                depth: 1
            }
        );
        for (pages, frames) in [(15360, 10240), (1 << 20, 1 << 14), (5000, 4990)] {
            let w = window("seq-live", false, pages, frames);
            let spent = (w.depth + 1) * w.pages;
            assert!(
                spent * 20 <= (pages - frames).max(40),
                "{pages} {frames}: {w:?}"
            );
        }
    }

    #[test]
    fn test_seq_windows_stay_small_enough_to_keep_its_sequences() {
        let w = window("seq-live", false, 15360, 10240);
        assert_eq!(
            w,
            Window {
                pages: SEQ_WINDOW,
                depth: 1
            }
        );
        assert_eq!(window("mru-live", false, 15360, 10240).pages, 128);
    }

    #[test]
    fn test_other_policies_get_large_windows_within_a_quarter_of_the_budget() {
        let w = Window {
            pages: 128,
            depth: 4,
        };
        assert_eq!(window("clock", false, 15360, 10240), w);
        assert_eq!(window("mru-live", false, 1000, 10240), w);
        let small = window("clock", false, 512, 128);
        assert!((small.depth + 1) * small.pages <= 128 / 4, "{small:?}");
    }

    #[test]
    fn test_policy_programs_read_ahead_synchronously() {
        assert_eq!(window("mru.hp", true, 15360, 10240).depth, 0);
    }
}
