//! What the interposer says it did: the `end` lines of `pagepilot run --log FILE`, one per
//! region when it ends (`pagepilot-run[PID]: end PATH faults=N pages_read=N
//! pages_written=N`, possibly more fields after), summed over every process and region of
//! a run.

use std::path::Path;

use serde::{Deserialize, Serialize};

/// The counts of every region of a run, summed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Interposed {
    /// Regions that ended (their `end` lines).
    pub regions: u64,
    /// Faults the regions served.
    pub faults: u64,
    /// Pages read into the regions: the page-ins.
    pub pages_read: u64,
    /// Pages written back.
    pub pages_written: u64,
}

/// Sums the `end` lines of `text`; `None` when there is none (no region was made, or the
/// interposer does nothing yet).
pub fn parse(text: &str) -> Option<Interposed> {
    let mut sum = Interposed::default();
    for line in text.lines() {
        let Some((head, rest)) = line.split_once("]: end ") else {
            continue;
        };
        if !head.starts_with("pagepilot-run[") {
            continue;
        }
        sum.regions += 1;
        // The path may hold spaces: the counts are the `key=value` words from the last
        // ` faults=` on (later fields, numbers or not, are skipped).
        let counts = rest.rfind(" faults=").map_or(rest, |i| &rest[i + 1..]);
        for word in counts.split_whitespace() {
            let Some((key, value)) = word.split_once('=') else {
                continue;
            };
            let Ok(n) = value.parse::<u64>() else {
                continue;
            };
            match key {
                "faults" => sum.faults += n,
                "pages_read" => sum.pages_read += n,
                "pages_written" => sum.pages_written += n,
                _ => {}
            }
        }
    }
    (sum.regions > 0).then_some(sum)
}

/// [`parse`] of the log file at `path`; a missing file is no region.
pub fn read(path: &Path) -> std::io::Result<Option<Interposed>> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(parse(&text)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_end_lines_are_summed_over_processes_and_regions() {
        let log = "pagepilot-run[10]: take /d/a b.db size=1G policy=mru\n\
                   pagepilot-run[10]: end /d/a b.db faults=5 pages_read=40 pages_written=0\n\
                   pagepilot-run[11]: leave /lib/x.so: smaller than --min-size\n\
                   pagepilot-run[11]: end /d/c faults=2 pages_read=3 pages_written=1 \
                   frames=49154 policy=seq-live\n\
                   something else: end x faults=100\n";
        assert_eq!(
            parse(log),
            Some(Interposed {
                regions: 2,
                faults: 7,
                pages_read: 43,
                pages_written: 1
            })
        );
        assert_eq!(parse("pagepilot-run[1]: take /x\n"), None);
        assert_eq!(read(Path::new("/nonexistent/pp.log")).unwrap(), None);
    }
}
