//! Sequence detection: SEQ's rules for a missing fault (section 4.1).
//!
//! Order of the rules: extension is tried first, then the split. A fault on
//! `pf` can both extend one sequence (`pf = high_end + 1`) and lie in another
//! (whose `low_end` is `pf`); the paper's overlap rule covers exactly that
//! case ("if extending a sequence would lead to overlapping with another
//! sequence, then the sequence that would be overlapped is deleted"), so
//! extension wins and the other sequence goes. A downward scan through an
//! upward sequence therefore grows one downward sequence instead of
//! splitting the old one page by page.

use super::table::Table;
use crate::{Memory, Page, SPACE_SHIFT};

/// Which rule a fault applied.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule {
    /// The fault extended a sequence at its head.
    Extended,
    /// The fault could extend two sequences: the older was deleted and the
    /// newer extended.
    ExtendedNewer,
    /// The extension reached into another sequence, which was deleted.
    ExtendedOverlapping,
    /// The fault fell inside a sequence, which was split.
    Split,
    /// A new one-page sequence.
    Created,
}

const IN_SPACE: u64 = (1 << SPACE_SHIFT) - 1;

/// The page below `pf` in the same address space.
fn below(pf: u64) -> Option<u64> {
    (pf & IN_SPACE != 0).then(|| pf - 1)
}

/// The page above `pf` in the same address space.
fn above(pf: u64) -> Option<u64> {
    (pf & IN_SPACE != IN_SPACE).then(|| pf + 1)
}

impl Table {
    /// Applies SEQ's rules to a missing fault on `page` at `time`.
    pub fn on_missing(&mut self, page: Page, time: u64, mem: &dyn Memory) -> Rule {
        self.note_fault(page.slot, time);
        let pf = page.vpn;
        let grows = |v: Option<u64>| {
            let id = self.headed_at(v?)?;
            Some((id, self.get(id).extended_by(pf)?))
        };
        let (up, down) = (grows(below(pf)), grows(above(pf)));
        let grown = match (up, down) {
            (Some(a), Some(b)) => {
                let (older, newer) = if self.get(a.0).last <= self.get(b.0).last {
                    (a, b)
                } else {
                    (b, a)
                };
                self.delete(older.0);
                Some((newer, Rule::ExtendedNewer))
            }
            (Some(one), None) | (None, Some(one)) => Some((one, Rule::Extended)),
            (None, None) => None,
        };
        if let Some(((id, dir), mut rule)) = grown {
            if let Some(overlapped) = self.containing(page) {
                self.delete(overlapped);
                rule = Rule::ExtendedOverlapping;
            }
            self.extend(id, page, dir, time);
            return rule;
        }
        if let Some(id) = self.containing(page) {
            self.split(id, page, mem);
            self.create(page, time);
            return Rule::Split;
        }
        self.create(page, time);
        Rule::Created
    }
}
