//! The replacement-policy interface shared by the simulator and the live pager.

use crate::{Memory, Page};

/// Kinds of faults a user-space pager observes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FaultKind {
    /// The page was not resident; it is being brought in.
    Missing,
    /// The page was resident but its referenced bit was cleared; this access
    /// set it again (reference-bit emulation).
    Minor,
}

/// A fault as delivered to a policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fault {
    /// The faulting page.
    pub page: Page,
    /// Missing or minor.
    pub kind: FaultKind,
    /// Whether the access was a write.
    pub write: bool,
    /// Engine time: the reference index in the simulator, a fault counter live.
    pub time: u64,
}

/// A replacement policy that sees only what a live user-space pager can
/// observe: faults, referenced and modified bits, frame grants and reclaims.
///
/// Protocol, per missing fault on page `p`:
/// 1. if no frame is free, the engine calls [`Policy::victim`]; the engine
///    checks the answer (a resident page other than `p`) and, if it is not
///    valid, overrules it with its own fallback choice;
/// 2. the engine evicts the victim and calls [`Policy::on_evict`];
/// 3. the engine loads `p` and calls [`Policy::on_fault`] with
///    [`FaultKind::Missing`].
///
/// Minor faults are delivered with [`Policy::on_fault`] alone.
pub trait Policy: Send {
    /// Short name, as accepted by the registry.
    fn name(&self) -> String;

    /// A fault was served (the page is now resident and referenced).
    fn on_fault(&mut self, fault: Fault, mem: &mut dyn Memory);

    /// Chooses a resident page to evict so that `incoming` can be loaded.
    /// `None` means the policy has no candidate; the engine falls back.
    fn victim(&mut self, incoming: Page, mem: &mut dyn Memory) -> Option<Page>;

    /// A resident page left memory (chosen by this policy, overruled by the
    /// engine, or reclaimed). The policy must forget it.
    fn on_evict(&mut self, page: Page, mem: &mut dyn Memory);

    /// The engine will name another page with `page.slot`: the policy drops
    /// whatever history it keeps of `page` (ghost entries). The live pager
    /// gives slots to the pages it holds and remembers as many evicted ones
    /// as it holds frames, twice over, then reuses the oldest evicted
    /// page's slot; the simulator never reuses one. The default does
    /// nothing: a policy that forgets a page when it is evicted has no
    /// history to drop.
    fn on_forget(&mut self, page: Page) {
        let _ = page;
    }

    /// The frame manager takes `count` frames back (HiPEC's ReclaimFrame).
    /// Returns the pages to evict, at most `count`. An empty answer (the
    /// default) lets the engine evict one page at a time through
    /// [`Policy::victim`].
    fn reclaim(&mut self, count: usize, mem: &mut dyn Memory) -> Vec<Page> {
        let _ = (count, mem);
        Vec::new()
    }

    /// What happened that the run's report should mention (for example a
    /// policy program stopped by its budget). Empty by default.
    fn incidents(&self) -> Vec<String> {
        Vec::new()
    }
}

/// A simulator-only reference policy: it needs to see every reference (exact
/// LRU) or the future (OPT), which no live pager can. The live pager's
/// registry refuses these; see [`crate::registry`].
pub trait ReferencePolicy: Policy {
    /// Every reference, hit or miss, in trace order. `index` is the position
    /// in the trace. Called before any fault handling for that reference.
    fn on_reference(&mut self, page: Page, index: u64);

    /// A run of references that all hit resident pages, `slots[k]` at
    /// trace position `first_index + k`; `vpns[slot]` is a slot's page
    /// number. The same as [`ReferencePolicy::on_reference`] for each in
    /// order (the default), in one call: the simulator hands runs of hits
    /// over at once, so a policy pays one dynamic call per run, not per
    /// reference.
    fn on_hits(&mut self, slots: &[u32], first_index: u64, vpns: &[u64]) {
        for (k, &slot) in slots.iter().enumerate() {
            let page = Page {
                slot,
                vpn: vpns[slot as usize],
            };
            self.on_reference(page, first_index + k as u64);
        }
    }
}
