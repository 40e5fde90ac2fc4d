//! Which page of a chosen sequence SEQ replaces.

use super::sequence::Sequence;
use crate::{Memory, Page};

/// The first resident page at least `m` pages behind the head of `seq`,
/// searching from there towards the tail (each page found by its number:
/// a sequence keeps no list of its pages, which would grow with a scan of
/// the whole region). Known on-disk ranges are skipped in
/// one step, and the on-disk pages this search passes are added to the range,
/// so repeated searches stay cheap.
pub fn scan(seq: &mut Sequence, m: u64, mem: &dyn Memory) -> Option<Page> {
    if seq.len <= m {
        return None;
    }
    let start = seq.len - 1 - m;
    let mut at = start;
    let found = loop {
        if let Some((a, b)) = seq.disk {
            if (a..=b).contains(&at) {
                match a.checked_sub(1) {
                    Some(below) => {
                        at = below;
                        continue;
                    }
                    None => break None,
                }
            }
        }
        if let Some(page) = mem.page_of(seq.vpn_at(at)) {
            if mem.is_resident(page.slot) {
                break Some((at, page));
            }
        }
        match at.checked_sub(1) {
            Some(below) => at = below,
            None => break None,
        }
    };
    // Everything from just past the victim (or the tail) up to `start` is on disk.
    let run_low = found.map_or(0, |(at, _)| at + 1);
    if run_low <= start {
        seq.note_run_on_disk(run_low, start);
    }
    found.map(|(_, page)| page)
}
