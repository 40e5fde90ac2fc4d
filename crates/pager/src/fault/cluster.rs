//! How many pages a missing fault brings in, asked of the region's planner
//! (`readahead`) through its view of the region's pages: the frame table
//! and the backing store.

use crate::frame_table::{FrameTable, State};
use crate::readahead::PageView;
use crate::region_state::RegionState;
use crate::shared::Shared;

pub(super) use crate::readahead::Plan;

/// The region's pages as the planner sees them.
struct Pages<'a> {
    /// Page states and the budget.
    table: &'a FrameTable,
    /// Which pages have data to read.
    sh: &'a Shared,
}

impl<'a> Pages<'a> {
    /// The pages of `sh`'s region, their states in `table`.
    fn new(sh: &'a Shared, table: &'a FrameTable) -> Self {
        Pages { table, sh }
    }
}

impl PageView for Pages<'_> {
    fn absent(&self, s: u32) -> bool {
        self.table.state(s) == State::Absent
    }

    fn has_data(&self, s: u32) -> bool {
        self.sh.store().has_data(s as usize)
    }

    fn pages(&self) -> usize {
        self.table.pages()
    }

    fn usable(&self) -> usize {
        self.table.usable()
    }

    fn room(&self) -> usize {
        self.table.room()
    }

    fn budget(&self) -> usize {
        self.table.budget()
    }
}

/// Plans the cluster a missing fault at `s` brings in (`ReadAhead::plan`).
pub(super) fn plan(sh: &Shared, g: &mut RegionState, s: u32) -> Plan {
    g.readahead.plan(s, &Pages::new(sh, &g.table), sh.tuning())
}

/// The next window to read ahead of the current sequence, `(first, pages)`
/// (`ReadAhead::next_window`).
pub(super) fn next_window(sh: &Shared, g: &RegionState) -> Option<(u32, usize)> {
    g.readahead.next_window(&Pages::new(sh, &g.table))
}

/// Absent pages from `s` on of `s`'s kind, at most `want` and half the
/// usable budget (`readahead::absent_run`).
pub(super) fn absent_run(sh: &Shared, g: &RegionState, s: u32, want: usize) -> usize {
    crate::readahead::absent_run(&Pages::new(sh, &g.table), s, want)
}
