//! SEQ (Glass and Cao, "Adaptive Page Replacement Based on Memory Reference
//! Behavior", section 4.1): detect sequences of missing faults to consecutive
//! pages and replace MRU-like inside them, LRU otherwise.
//!
//! The sequence machinery is shared; the LRU fallback is a type parameter:
//! [`Seq<ExactLru>`] is the paper's SEQ (exact LRU sees every reference, so it
//! runs only in the simulator) and [`Seq<Clock>`] is what the live pager runs
//! (second chance over reference-bit emulation).
//!
//! Sequences are grouped per process for free: the address space is in the
//! top bits of the page number and adjacency never crosses it, which is the
//! paper's global SEQ (section 5).

mod ages;
mod choice;
mod detect;
mod params;
mod sequence;
mod table;
#[cfg(test)]
mod tests;
mod victim;

pub use detect::Rule;
pub use params::SeqParams;
pub use sequence::Dir;

use super::{Clock, ExactLru};
use crate::{Fault, FaultKind, Memory, Page, Policy, ReferencePolicy};
use table::Table;

/// How SEQ's victims were chosen so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Decisions {
    /// Victims taken from a sequence.
    pub from_sequences: u64,
    /// Victims left to the LRU fallback.
    pub from_fallback: u64,
}

/// A sequence as SEQ tracks it: the paper's `<low_end, high_end, dir>`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SequenceView {
    /// Lowest page.
    pub low: u64,
    /// Highest page.
    pub high: u64,
    /// Growth direction.
    pub dir: Dir,
}

/// The SEQ replacement policy with fallback `F` for when no sequence of
/// length at least L has a page to give.
#[derive(Debug)]
pub struct Seq<F> {
    name: &'static str,
    params: SeqParams,
    table: Table,
    fallback: F,
    decisions: Decisions,
    last_rule: Option<Rule>,
}

impl Seq<ExactLru> {
    /// The paper's SEQ, with exact LRU as the fallback (simulator only).
    pub fn exact(params: SeqParams, slots: usize) -> Self {
        Seq::with_fallback("seq", params, slots, ExactLru::new())
    }
}

impl Seq<Clock> {
    /// SEQ as the live pager runs it, with CLOCK as the fallback.
    pub fn live(params: SeqParams, slots: usize) -> Self {
        Seq::with_fallback("seq-live", params, slots, Clock::new())
    }
}

impl<F: Policy> Seq<F> {
    /// SEQ named `name` falling back to `fallback`, for an engine naming
    /// `slots` page slots (more are accepted, at some reallocation cost).
    pub fn with_fallback(name: &'static str, params: SeqParams, slots: usize, fallback: F) -> Self {
        Seq {
            name,
            params,
            table: Table::new(&params, slots),
            fallback,
            decisions: Decisions::default(),
            last_rule: None,
        }
    }

    /// The parameters in use.
    pub fn params(&self) -> SeqParams {
        self.params
    }

    /// How the victims so far were chosen.
    pub fn decisions(&self) -> Decisions {
        self.decisions
    }

    /// Number of sequences tracked now (at most X).
    pub fn tracked(&self) -> usize {
        self.table.count()
    }

    /// The rule the last missing fault applied.
    pub fn last_rule(&self) -> Option<Rule> {
        self.last_rule
    }

    /// The sequences tracked now, sorted by low end.
    pub fn sequences(&self) -> Vec<SequenceView> {
        let mut all: Vec<SequenceView> = self
            .table
            .iter()
            .map(|s| SequenceView {
                low: s.low(),
                high: s.high(),
                dir: s.dir,
            })
            .collect();
        all.sort_unstable();
        all
    }
}

impl<F: Policy> Policy for Seq<F> {
    fn name(&self) -> String {
        if self.params == SeqParams::default() {
            return self.name.into();
        }
        let SeqParams { l, m, n, x } = self.params;
        format!("{}:L={l},M={m},N={n},X={x}", self.name)
    }

    fn on_fault(&mut self, fault: Fault, mem: &mut dyn Memory) {
        // Sequences come from missing faults only, as in the paper.
        if fault.kind == FaultKind::Missing {
            self.last_rule = Some(self.table.on_missing(fault.page, fault.time));
        }
        self.fallback.on_fault(fault, mem);
    }

    fn victim(&mut self, incoming: Page, mem: &mut dyn Memory) -> Option<Page> {
        if let Some(page) = self.table.choose(self.params.m, mem) {
            self.decisions.from_sequences += 1;
            return Some(page);
        }
        self.decisions.from_fallback += 1;
        self.fallback.victim(incoming, mem)
    }

    fn on_evict(&mut self, page: Page, mem: &mut dyn Memory) {
        self.table.note_evicted(page);
        self.fallback.on_evict(page, mem);
    }

    fn on_forget(&mut self, page: Page) {
        self.table.forget(page);
        self.fallback.on_forget(page);
    }
}

impl<F: ReferencePolicy> ReferencePolicy for Seq<F> {
    fn on_reference(&mut self, page: Page, index: u64) {
        self.fallback.on_reference(page, index);
    }
}
