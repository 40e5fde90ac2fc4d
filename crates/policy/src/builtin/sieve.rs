//! SIEVE (Zhang et al., NSDI'24): a FIFO queue, a visited bit per page and a
//! hand that sweeps from the oldest page towards the newest, never promoting.
//!
//! The visited bit is the referenced bit. SIEVE inserts pages unvisited, so a
//! missing fault clears the bit the fault itself set; the page's next access
//! is then a minor fault that marks it visited (one minor fault per page per
//! sweep, the price of observing hits live).

use crate::{list::SlotList, Fault, FaultKind, Memory, Page, Policy};

/// SIEVE eviction.
#[derive(Debug, Default)]
pub struct Sieve {
    /// Front = oldest (SIEVE's tail), back = newest (SIEVE's head).
    queue: SlotList,
    /// Next page the hand examines; `None` means start again at the oldest.
    hand: Option<u32>,
}

impl Sieve {
    /// A new SIEVE policy.
    pub fn new() -> Self {
        Self::default()
    }
}

impl Policy for Sieve {
    fn name(&self) -> String {
        "sieve".into()
    }

    fn on_fault(&mut self, fault: Fault, mem: &mut dyn Memory) {
        if fault.kind == FaultKind::Missing {
            self.queue.push_back(fault.page.slot);
            mem.clear_referenced(fault.page.slot);
        }
    }

    fn victim(&mut self, _incoming: Page, mem: &mut dyn Memory) -> Option<Page> {
        // One full sweep clears every visited bit, so two sweeps always end.
        for _ in 0..=2 * self.queue.len() {
            let at = self.hand.or_else(|| self.queue.front())?;
            if mem.is_referenced(at) {
                mem.clear_referenced(at);
                self.hand = self.queue.next_of(at);
            } else {
                self.hand = Some(at);
                return Some(mem.page(at));
            }
        }
        self.queue.front().map(|s| mem.page(s))
    }

    fn on_evict(&mut self, page: Page, _mem: &mut dyn Memory) {
        if self.hand == Some(page.slot) {
            self.hand = self.queue.next_of(page.slot);
        }
        self.queue.remove(page.slot);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::builtin::{testbed::Testbed, Fifo};

    /// A hot page touched between every scanned page survives the scan under
    /// SIEVE, while FIFO throws it out every `frames` faults.
    #[test]
    fn test_sieve_keeps_hot_page_through_scan() {
        let hot = 0;
        let mut refs = vec![hot];
        for scanned in 1..40 {
            refs.extend([scanned, hot]);
        }
        let mut sieve = Sieve::new();
        let mut bed = Testbed::new(40, 4);
        bed.run(&mut sieve, &refs);
        assert!(!bed.evicted.contains(&hot), "evicted {:?}", bed.evicted);
        assert_eq!(bed.faults, 40, "one fault per distinct page");

        let mut fifo = Fifo::new();
        let mut bed = Testbed::new(40, 4);
        bed.run(&mut fifo, &refs);
        assert!(bed.faults > 40, "FIFO should re-fault the hot page");
    }

    /// Worked by hand: frames 3, refs a b c a d e. `a` is visited when `d`
    /// faults, so the hand spares it and evicts `b`; the hand stays past `b`
    /// at `c`, which `e` then evicts (no promotion: `a` stays oldest).
    #[test]
    fn test_sieve_hand_spares_visited_and_keeps_position() {
        let (a, b, c, d, e) = (0, 1, 2, 3, 4);
        let mut sieve = Sieve::new();
        let mut bed = Testbed::new(5, 3);
        bed.run(&mut sieve, &[a, b, c, a, d, e]);
        assert_eq!(bed.evicted, vec![b, c]);
        assert_eq!(sieve.queue.iter().collect::<Vec<_>>(), vec![a, d, e]);
        assert_eq!(bed.minor, 1, "the hit on `a` is seen as one minor fault");
    }

    /// When every page is visited the hand clears them all and wraps to the
    /// oldest page.
    #[test]
    fn test_sieve_wraps_when_every_page_is_visited() {
        let mut sieve = Sieve::new();
        let mut bed = Testbed::new(4, 3);
        bed.run(&mut sieve, &[0, 1, 2, 0, 1, 2, 3]);
        assert_eq!(bed.evicted, vec![0]);
    }
}
