//! What a policy may observe and ask of the engine that runs it.

use crate::Page;

/// The engine's side of the policy interface: the resident set, the
/// referenced and modified bits, and the frame pool.
///
/// Both the simulator and the live pager implement it. Everything here is
/// observable by a user-space pager on a stock kernel: the referenced bit is
/// emulated by unmapping the page ([`Memory::clear_referenced`]) so that the
/// next access raises a minor fault, and the modified bit by write-protect
/// tracking.
pub trait Memory {
    /// Number of page slots the engine may name (pages are `Page::slot < slots`).
    fn slots(&self) -> usize;
    /// Frames this policy currently holds (its allotment).
    fn capacity(&self) -> usize;
    /// Frames in use by resident pages.
    fn resident(&self) -> usize;
    /// Whether the page in `slot` is resident.
    fn is_resident(&self, slot: u32) -> bool;
    /// The page in `slot`.
    fn page(&self, slot: u32) -> Page;
    /// The page with virtual page number `vpn`, if the engine knows it.
    fn page_of(&self, vpn: u64) -> Option<Page>;
    /// Whether the resident page was accessed since its bit was last cleared.
    fn is_referenced(&self, slot: u32) -> bool;
    /// Whether the resident page was written since it was last written back.
    fn is_modified(&self, slot: u32) -> bool;
    /// Clears the referenced bit. The engine re-arms reference emulation, so the
    /// next access to the page raises [`crate::FaultKind::Minor`].
    fn clear_referenced(&mut self, slot: u32);
    /// Asks the frame pool for `count` more frames; returns how many were granted.
    fn request_frames(&mut self, count: usize) -> usize;
    /// Returns up to `count` free frames to the pool; returns how many were returned.
    fn release_frames(&mut self, count: usize) -> usize;
    /// Starts an asynchronous write-back of a modified resident page (HiPEC's
    /// Flush). Returns false if the page is not resident.
    fn flush(&mut self, slot: u32) -> bool;
}
