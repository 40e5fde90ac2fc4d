//! The Rust side of `python/tests/test_stacked_dataspaces.py`: a compressed
//! dataspace over a persistent one, written and read through a region,
//! then its counters as JSON: the Python test runs the same operations
//! through `pagepilot` and compares the counts.
//!
//! `cargo run -p pagepilot-python --example dataspace_counts -- DIR DATA
//! TIER_BYTES BUDGET_BYTES`: DATA is the bytes to write (a whole number of
//! pages); the persistent dataspace "base" is created in DIR.

use std::sync::Arc;

use pagepilot_dataspace::{CompressedManager, Manager, PersistentManager};
use pagepilot_pager::{Attachment, Backing, Region, RegionOptions};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let [_, dir, data, tier, budget] = &args[..] else {
        return Err("usage: dataspace_counts DIR DATA TIER_BYTES BUDGET_BYTES".into());
    };
    let data = std::fs::read(data)?;
    let persistent = PersistentManager::new(dir);
    let base = persistent.create_named("base", data.len() as u64)?;
    let compressed = Arc::new(CompressedManager::new(tier.parse()?));
    let id = persistent.transfer(&base, compressed.as_ref())?;
    let opts = RegionOptions::new(
        Backing::Dataspaces(vec![Attachment::whole(compressed.clone(), id.clone())]),
        budget.parse()?,
        "clock",
    );
    let region = Region::map(opts)?;
    // SAFETY: the region maps `region.len()` writable bytes at `as_ptr()`
    // until it is unmapped below, after the last use of the slice.
    let mem = unsafe { std::slice::from_raw_parts_mut(region.as_ptr(), region.len()) };
    mem.copy_from_slice(&data);
    region.flush()?;
    let same = mem[..] == data[..];
    let stats = region.stats();
    region.unmap()?;
    let s = compressed.stats(&id).ok_or("no statistics")?;
    println!(
        "{{\"same\": {same}, \"region_evictions\": {}, \"region_missing_faults\": {}, \"pages\": {}, \
         \"zero_pages\": {}, \"dirty_pages\": {}, \"reads_kept\": {}, \"pages_written\": {}, \
         \"evictions_to_lower\": {}, \"synced_to_lower\": {}, \"reads_from_tier\": {}, \
         \"reads_from_lower\": {}}}",
        stats.evictions,
        stats.missing_faults,
        s.pages,
        s.zero_pages,
        s.dirty_pages,
        s.reads_kept,
        s.pages_written,
        s.evictions_to_lower,
        s.synced_to_lower,
        s.reads_from_tier,
        s.reads_from_lower
    );
    Ok(())
}
