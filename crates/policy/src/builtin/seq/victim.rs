//! Which page of a chosen sequence SEQ replaces.

use super::sequence::Sequence;
use crate::{Memory, Page};

/// The first resident page at least `m` pages behind the head of `seq`
/// (whose pages' slots, by offset from the tail, are `slots`),
/// searching from there towards the tail. Known on-disk ranges are skipped in
/// one step, and the on-disk pages this search passes are added to the range,
/// so repeated searches stay cheap.
pub fn scan(seq: &mut Sequence, slots: &[u32], m: u64, mem: &dyn Memory) -> Option<Page> {
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
        let slot = slots[at as usize];
        // A live engine may have given the slot to another page since.
        if mem.is_resident(slot) && mem.page(slot).vpn == seq.vpn_at(at) {
            break Some((
                at,
                Page {
                    slot,
                    vpn: seq.vpn_at(at),
                },
            ));
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
