//! What a compressed dataspace's tier reports.

/// What a compressed dataspace's tier holds and has done.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CompressedStats {
    /// Pages held in the tier (zero pages included).
    pub pages: usize,
    /// Of them, zero pages (held as nothing).
    pub zero_pages: usize,
    /// Of them, pages newer than the lower dataspace's copy.
    pub dirty_pages: usize,
    /// Compressed bytes held.
    pub compressed_bytes: usize,
    /// The manager's budget in bytes, shared by all its dataspaces.
    pub budget_bytes: usize,
    /// Compressed bytes held by all the dataspaces sharing the budget.
    pub pool_bytes: usize,
    /// Pages read from the lower dataspace and kept (clean).
    pub reads_kept: u64,
    /// Pages written into the tier.
    pub pages_written: u64,
    /// Pages written down to the lower dataspace to make room.
    pub evictions_to_lower: u64,
    /// Pages written down to the lower dataspace by `sync`.
    pub synced_to_lower: u64,
    /// Page reads served from the tier.
    pub reads_from_tier: u64,
    /// Page reads served from the lower dataspace.
    pub reads_from_lower: u64,
}
