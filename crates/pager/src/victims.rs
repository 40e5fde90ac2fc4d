//! Choosing victims: the policy names them (through its port), and the
//! pager checks each answer, overruling one that is not a resident page it
//! may take, and guards against two pages evicting each other in turn.
//! Pure: the chosen pages are Evicting in the frame table, and the caller
//! writes them back and punches them.

use crate::frame_table::{State, FLUSHING, PENDING};
use crate::region_state::{RegionState, RECENT_FAULTS};
use crate::stats::Counters;

impl RegionState {
    /// Victims making room in the budget for pages now `Loading` from `s`
    /// on, all chosen before the cluster is read, so an MRU-like policy
    /// gives up pages it has used, not the ones being read. Frames for the
    /// pages read ahead are taken back first (ReclaimFrame: a policy
    /// program names them without queueing anything), then the faulting
    /// page's own victim (PageFault). A built-in policy answers no reclaim
    /// and names every victim. `evictions` is the region's eviction count.
    pub fn choose_victims(&mut self, s: u32, evictions: u64, stats: &Counters) -> Vec<(u32, bool)> {
        let excess = self.table.excess();
        let mut victims = if excess > 1 {
            self.take_reclaimed(excess - 1, stats)
        } else {
            Vec::new()
        };
        while victims.len() < excess {
            match self.take_victim(s, evictions, stats) {
                Some(v) => victims.push(v),
                None => {
                    Counters::add(&stats.over_budget, 1);
                    break;
                }
            }
        }
        victims
    }

    /// Asks the policy for a victim to make room for `incoming`, overruling
    /// any answer that is not a resident page other than `incoming` (and
    /// not being flushed or read ahead). The victim is Evicting and the
    /// policy told it is gone. Returns it and whether it must be written
    /// back; none if no page can be taken.
    pub fn take_victim(
        &mut self,
        incoming: u32,
        evictions: u64,
        stats: &Counters,
    ) -> Option<(u32, bool)> {
        let named = self.policy.victim(&mut self.table, incoming);
        let table = &mut self.table;
        let v = match named.and_then(|p| table.page_named(p)) {
            Some(p) if p != incoming && takeable(table, p) => p,
            _ => {
                Counters::add(&stats.overruled, 1);
                table.fallback_victim(&[incoming])?
            }
        };
        let v = self.guard_refault(incoming, v, evictions, stats);
        Some(self.give_up(v))
    }

    /// The victim `named` for `incoming`, unless the two would evict each
    /// other in turn: `incoming` was itself evicted a few evictions ago and
    /// `named` is one of the pages the last faults brought in. An MRU-like
    /// policy does that to a copy reading from two or four pages in turn
    /// (glibc's `memcpy` of large buffers interleaves pages): each fault
    /// evicts the page the next one needs, and no access completes. Another
    /// resident page is taken instead (`refaults_guarded`).
    fn guard_refault(
        &mut self,
        incoming: u32,
        named: u32,
        evictions: u64,
        stats: &Counters,
    ) -> u32 {
        if incoming as usize >= self.table.pages() {
            // No page is coming in (a budget shrinking).
            return named;
        }
        let evicted = self.table.evicted_at(incoming);
        let thrash = evicted != 0 && evictions - evicted < RECENT_FAULTS as u64;
        if !thrash || !self.recent_faults.contains(&named) {
            return named;
        }
        let keep: Vec<u32> = self
            .recent_faults
            .iter()
            .copied()
            .chain([incoming])
            .collect();
        match self.table.fallback_victim(&keep) {
            Some(other) => {
                Counters::add(&stats.refaults_guarded, 1);
                other
            }
            None => named,
        }
    }

    /// Asks the policy to give back `count` frames (HiPEC's ReclaimFrame);
    /// answers that are not pages it may take are overruled. The pages
    /// named are Evicting and forgotten by the policy, like
    /// [`RegionState::take_victim`]'s.
    pub fn take_reclaimed(&mut self, count: usize, stats: &Counters) -> Vec<(u32, bool)> {
        let chosen = self.policy.reclaim(&mut self.table, count);
        let mut victims = Vec::new();
        for p in chosen.into_iter().take(count) {
            let page = self
                .table
                .page_named(p)
                .filter(|&p| takeable(&self.table, p));
            let Some(page) = page else {
                Counters::add(&stats.overruled, 1);
                continue;
            };
            victims.push(self.give_up(page));
        }
        victims
    }
}

/// Whether page `p` may be taken as a victim: resident, and neither being
/// flushed nor read ahead and not handed to the policy yet.
fn takeable(table: &crate::frame_table::FrameTable, p: u32) -> bool {
    table.state(p) == State::Resident && table.flags(p) & (FLUSHING | PENDING) == 0
}

#[cfg(test)]
#[path = "victims_tests.rs"]
mod tests;
