//! Page identity as both engines see it.

/// A page as a policy sees it.
///
/// `vpn` is the virtual page number: adjacency (`vpn + 1`) is meaningful, which
/// is what sequence detection (SEQ) needs. In a multiprogrammed run the
/// process (address space) is encoded in the top 16 bits, see [`Page::space`],
/// so pages of different processes are never adjacent.
///
/// `slot` is a dense index in `0..slots` assigned by the engine (the trace's
/// page table in the simulator, the page index in a live region). Policies use
/// it to keep per-page state in flat arrays instead of hash maps.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Page {
    /// Dense per-engine index of the page, `< slots`.
    pub slot: u32,
    /// Virtual page number, with the address space in the top 16 bits.
    pub vpn: u64,
}

/// Bits of a virtual page number that hold the page within its space.
pub const SPACE_SHIFT: u32 = 48;

impl Page {
    /// The address space (process) this page belongs to.
    pub fn space(self) -> u16 {
        (self.vpn >> SPACE_SHIFT) as u16
    }

    /// Builds a virtual page number from an address space and a page number in it.
    pub fn vpn_in(space: u16, page: u64) -> u64 {
        (u64::from(space) << SPACE_SHIFT) | (page & ((1 << SPACE_SHIFT) - 1))
    }
}
