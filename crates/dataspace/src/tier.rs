//! The compressed tier of a compressed dataspace: pages kept lz4-compressed
//! in memory under its manager's byte budget (one for all its dataspaces,
//! `tier_pool`), over a lower dataspace that receives what the pool evicts
//! of this tier (least recently used first) and, at `sync`, every page
//! newer than its copy there. Pages read from the lower dataspace are kept
//! too, clean (a cache: dropped without a write when evicted).
//!
//! Locking: `state` (the page table and LRU order) is held only to look up,
//! insert or remove entries; compression and decompression happen outside
//! it. `flushing` lets one eviction or sync at a time write to the lower
//! dataspace, so two versions of a page never race there; an entry being
//! written down stays in the table (reads still find it) until the write
//! completes, and is then dropped only if no newer version replaced it.

use std::collections::{BTreeMap, HashMap};
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::sys::PAGE;
use crate::tier_data::Data;
use crate::tier_pool::TierPool;
pub use crate::tier_stats::CompressedStats;
use crate::{DataspaceId, PageStore};

struct Entry {
    data: Data,
    /// Its place in the LRU order (0: out of it, being written down).
    stamp: u64,
    /// Which write put it there.
    version: u64,
    /// Newer than the lower dataspace's copy.
    dirty: bool,
}

#[derive(Default)]
struct State {
    pages: HashMap<usize, Entry>,
    /// Stamp (the pool's clock) -> page, least recently used first.
    lru: BTreeMap<u64, usize>,
    /// Compressed bytes held.
    bytes: usize,
    /// Writes taken so far: a read from the lower dataspace is kept only
    /// if none came in while it read (it may have read an older copy).
    writes: u64,
}

impl State {
    /// Moves `page` to the most recently used end, as `stamp` (if it is in
    /// the order).
    fn touch(&mut self, page: usize, stamp: u64) {
        if let Some(e) = self.pages.get_mut(&page) {
            if e.stamp != 0 {
                self.lru.remove(&e.stamp);
                e.stamp = stamp;
                self.lru.insert(stamp, page);
            }
        }
    }

    /// Drops `page`'s entry; the bytes it held.
    fn remove(&mut self, page: usize) -> usize {
        let Some(e) = self.pages.remove(&page) else {
            return 0;
        };
        self.bytes -= e.data.bytes();
        if e.stamp != 0 {
            self.lru.remove(&e.stamp);
        }
        e.data.bytes()
    }

    /// Adds `page` as `data` at `stamp` (most recently used); the bytes it
    /// holds.
    fn insert(&mut self, page: usize, data: Data, stamp: u64, dirty: bool) -> usize {
        let n = data.bytes();
        self.bytes += n;
        self.lru.insert(stamp, page);
        self.pages.insert(
            page,
            Entry {
                data,
                stamp,
                version: stamp,
                dirty,
            },
        );
        n
    }
}

/// A page-aligned page, for writes down to an O_DIRECT lower store.
#[derive(Clone)]
#[repr(C, align(4096))]
struct PageBuf([u8; PAGE]);

/// The compressed tier over a lower dataspace.
pub(crate) struct Tier {
    /// The dataspace's id under the compressed manager, for errors.
    pub id: DataspaceId,
    lower: Box<dyn PageStore>,
    pool: Arc<TierPool>,
    /// Pages in the dataspace.
    pages: usize,
    state: Mutex<State>,
    flushing: Mutex<()>,
    written: AtomicU64,
    evicted: AtomicU64,
    synced: AtomicU64,
    from_tier: AtomicU64,
    from_lower: AtomicU64,
    kept: AtomicU64,
}

impl Drop for Tier {
    fn drop(&mut self) {
        // Its bytes leave the pool with it.
        self.pool.shrink(self.state().bytes);
    }
}

impl Tier {
    /// A tier over `lower`, named `id`, holding its pages under `pool`'s
    /// budget.
    pub fn new(id: DataspaceId, lower: Box<dyn PageStore>, pool: Arc<TierPool>) -> Arc<Self> {
        let tier = Arc::new(Tier {
            id,
            pages: (lower.size() as usize).div_ceil(PAGE),
            lower,
            pool: pool.clone(),
            state: Mutex::default(),
            flushing: Mutex::default(),
            written: AtomicU64::new(0),
            evicted: AtomicU64::new(0),
            synced: AtomicU64::new(0),
            from_tier: AtomicU64::new(0),
            from_lower: AtomicU64::new(0),
            kept: AtomicU64::new(0),
        });
        pool.join(&tier);
        tier
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The lower dataspace.
    pub fn lower(&self) -> &dyn PageStore {
        self.lower.as_ref()
    }

    /// Its statistics now.
    pub fn stats(&self) -> CompressedStats {
        let s = self.state();
        let zero_pages = s
            .pages
            .values()
            .filter(|e| matches!(e.data, Data::Zero))
            .count();
        CompressedStats {
            pages: s.pages.len(),
            zero_pages,
            dirty_pages: s.pages.values().filter(|e| e.dirty).count(),
            compressed_bytes: s.bytes,
            budget_bytes: self.pool.budget(),
            pool_bytes: self.pool.bytes(),
            reads_kept: self.kept.load(Ordering::Relaxed),
            pages_written: self.written.load(Ordering::Relaxed),
            evictions_to_lower: self.evicted.load(Ordering::Relaxed),
            synced_to_lower: self.synced.load(Ordering::Relaxed),
            reads_from_tier: self.from_tier.load(Ordering::Relaxed),
            reads_from_lower: self.from_lower.load(Ordering::Relaxed),
        }
    }

    /// Bytes of memory the tier holds (entries and compressed pages).
    pub fn bookkeeping_bytes(&self) -> usize {
        let s = self.state();
        s.bytes
            + s.pages.capacity() * (std::mem::size_of::<(usize, Entry)>() + 1)
            + s.lru.len() * 32
    }

    /// Decompresses `data`, the tier's copy of `page`, into `dst`.
    fn unpack(&self, page: usize, data: &Data, dst: &mut [u8]) -> io::Result<()> {
        match data {
            Data::Zero => dst.fill(0),
            Data::Raw(b) => dst.copy_from_slice(b),
            Data::Lz4(b) => {
                let bad = |why: String| {
                    io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!(
                            "compressed dataspace {}: page {page} does not decompress: {why}",
                            self.id
                        ),
                    )
                };
                let n = lz4_flex::block::decompress_into(b, dst).map_err(|e| bad(e.to_string()))?;
                if n != PAGE {
                    return Err(bad(format!("{n} bytes, not a page")));
                }
            }
        }
        Ok(())
    }

    /// Reads pages `first..first+pages` into `dst`: from the tier where it
    /// holds them, runs of the rest from the lower dataspace.
    ///
    /// # Safety
    /// As [`PageStore::read`].
    pub unsafe fn read(&self, first: usize, pages: usize, dst: *mut u8) -> io::Result<usize> {
        let avail = self.pages.saturating_sub(first).min(pages);
        let (held, writes): (Vec<Option<Data>>, u64) = {
            let mut s = self.state();
            let held = (first..first + avail)
                .map(|p| {
                    let d = s.pages.get(&p).map(|e| e.data.clone());
                    if d.is_some() {
                        s.touch(p, self.pool.tick());
                    }
                    d
                })
                .collect();
            (held, s.writes)
        };
        let mut i = 0;
        while i < avail {
            // SAFETY: `i < pages`: inside the caller's buffer.
            let at = unsafe { dst.add(i * PAGE) };
            if let Some(data) = &held[i] {
                // SAFETY: one page of the caller's buffer, lent for the call.
                let page = unsafe { std::slice::from_raw_parts_mut(at, PAGE) };
                self.unpack(first + i, data, page)?;
                if first + i + 1 == self.pages {
                    // Bytes beyond the dataspace's end read as zero.
                    let tail = (self.lower.size() as usize) - (self.pages - 1) * PAGE;
                    page[tail..].fill(0);
                }
                self.from_tier.fetch_add(1, Ordering::Relaxed);
                i += 1;
                continue;
            }
            let start = i;
            while i < avail && held[i].is_none() {
                i += 1;
            }
            // SAFETY: pages `start..i` of the caller's buffer, lent for the call.
            let got = unsafe { self.lower.read(first + start, i - start, at) }?;
            self.from_lower.fetch_add(got as u64, Ordering::Relaxed);
            // SAFETY: the `got` pages just read into the caller's buffer.
            let read = unsafe { std::slice::from_raw_parts(at, got * PAGE) };
            self.keep(first + start, read, writes)?;
            if got < i - start {
                return Ok(start + got);
            }
        }
        Ok(avail)
    }

    /// Keeps pages from `first` on, just read from the lower dataspace as
    /// `read`, clean, unless a write came in since the read began (after
    /// `writes` writes): the lower copy may then be older than the tier's.
    /// Whole pages of the dataspace only (the last, partial one is not
    /// kept).
    fn keep(&self, first: usize, read: &[u8], writes: u64) -> io::Result<()> {
        let whole = (self.lower.size() as usize / PAGE).saturating_sub(first);
        let packed: Vec<(usize, Data)> = read
            .chunks_exact(PAGE)
            .take(whole)
            .enumerate()
            .map(|(i, page)| (first + i, Data::of(page)))
            .collect();
        let mut grown = 0;
        let mut kept = 0;
        {
            let mut s = self.state();
            if s.writes != writes {
                return Ok(());
            }
            for (page, data) in packed {
                if !s.pages.contains_key(&page) {
                    grown += s.insert(page, data, self.pool.tick(), false);
                    kept += 1;
                }
            }
        }
        self.kept.fetch_add(kept, Ordering::Relaxed);
        self.pool.grow(grown);
        if self.pool.over() {
            self.pool.make_room()?;
        }
        Ok(())
    }

    /// Stores pages `first..first+pages` from `src` in the tier, then
    /// evicts down to the budget if it is exceeded.
    ///
    /// # Safety
    /// As [`PageStore::write`].
    pub unsafe fn write(&self, first: usize, pages: usize, src: *const u8) -> io::Result<()> {
        let n = self.pages.saturating_sub(first).min(pages);
        let packed: Vec<(usize, Data)> = (0..n)
            .map(|i| {
                // SAFETY: page `i < pages` of the caller's buffer.
                let page = unsafe { std::slice::from_raw_parts(src.add(i * PAGE), PAGE) };
                (first + i, Data::of(page))
            })
            .collect();
        // Zero pages the lower dataspace knows are zero need no entry.
        let keep: Vec<bool> = packed
            .iter()
            .map(|(p, d)| !matches!(d, Data::Zero) || self.lower.has_data(*p))
            .collect();
        let (mut grown, mut shrunk) = (0, 0);
        {
            let mut s = self.state();
            s.writes += 1;
            for ((page, data), keep) in packed.into_iter().zip(keep) {
                shrunk += s.remove(page);
                if keep {
                    grown += s.insert(page, data, self.pool.tick(), true);
                }
            }
        }
        self.pool.grow(grown);
        self.pool.shrink(shrunk);
        self.written.fetch_add(n as u64, Ordering::Relaxed);
        if self.pool.over() {
            self.pool.make_room()?;
        }
        Ok(())
    }

    /// The stamp of its least recently used page, if any is in the order.
    pub fn oldest_stamp(&self) -> Option<u64> {
        self.state().lru.first_key_value().map(|(&s, _)| s)
    }

    /// Writes `pages` (page, data, version) down to the lower dataspace,
    /// sorted and in runs of consecutive pages.
    fn write_down(&self, pages: &mut [(usize, Data, u64)]) -> io::Result<()> {
        pages.sort_by_key(|v| v.0);
        let mut buf: Vec<PageBuf> = Vec::new();
        let mut i = 0;
        while i < pages.len() {
            let start = i;
            i += 1;
            while i < pages.len() && pages[i].0 == pages[i - 1].0 + 1 {
                i += 1;
            }
            buf.clear();
            buf.resize(i - start, PageBuf([0; PAGE]));
            for (b, (page, data, _)) in buf.iter_mut().zip(&pages[start..i]) {
                self.unpack(*page, data, &mut b.0)?;
            }
            // SAFETY: `buf` is `i - start` page-aligned pages, ours.
            unsafe {
                self.lower
                    .write(pages[start].0, i - start, buf.as_ptr().cast())
            }?;
        }
        Ok(())
    }

    /// Drops its least recently used pages, at most `max_pages` of them and
    /// after the first only those stamped before `until`, until `want`
    /// bytes are freed, writing the dirty ones down to the lower dataspace
    /// first (the pool's eviction, `TierPool::make_room`). Returns how many
    /// pages it took out of the LRU order.
    pub fn evict(&self, want: usize, max_pages: usize, until: u64) -> io::Result<usize> {
        let _one = self.flushing.lock().unwrap_or_else(|p| p.into_inner());
        let mut down = Vec::new();
        let (mut taken, mut freed, mut shrunk) = (0, 0, 0);
        {
            let mut s = self.state();
            while freed < want && taken < max_pages {
                let Some((&stamp, _)) = s.lru.first_key_value() else {
                    break;
                };
                if taken > 0 && stamp >= until {
                    break;
                }
                let (_, page) = s.lru.pop_first().expect("looked at");
                taken += 1;
                let e = s.pages.get_mut(&page).expect("an LRU page is in the table");
                freed += e.data.bytes();
                e.stamp = 0;
                if e.dirty {
                    down.push((page, e.data.clone(), e.version));
                } else {
                    shrunk += s.remove(page);
                }
            }
        }
        let result = self.write_down(&mut down);
        {
            let mut s = self.state();
            for (page, _, version) in &down {
                let current = s.pages.get(page).map(|e| (e.version, e.stamp));
                match current {
                    Some((v, _)) if v == *version && result.is_ok() => shrunk += s.remove(*page),
                    // Not written down: back in the LRU order, still dirty.
                    Some((v, 0)) if v == *version => {
                        let stamp = self.pool.tick();
                        s.lru.insert(stamp, *page);
                        s.pages.get_mut(page).expect("present").stamp = stamp;
                    }
                    _ => {}
                }
            }
        }
        self.pool.shrink(shrunk);
        result?;
        self.evicted.fetch_add(down.len() as u64, Ordering::Relaxed);
        Ok(taken)
    }

    /// Writes every page newer than the lower dataspace's copy down, then
    /// syncs the lower dataspace. The pages stay in the tier, clean.
    pub fn sync(&self) -> io::Result<()> {
        let _one = self.flushing.lock().unwrap_or_else(|p| p.into_inner());
        let mut down: Vec<(usize, Data, u64)> = {
            let s = self.state();
            s.pages
                .iter()
                .filter(|(_, e)| e.dirty)
                .map(|(&p, e)| (p, e.data.clone(), e.version))
                .collect()
        };
        self.write_down(&mut down)?;
        {
            let mut s = self.state();
            for (page, _, version) in &down {
                if let Some(e) = s.pages.get_mut(page).filter(|e| e.version == *version) {
                    e.dirty = false;
                }
            }
        }
        self.synced.fetch_add(down.len() as u64, Ordering::Relaxed);
        self.lower.sync()
    }

    /// Whether page `page` must be read (false: known zero).
    pub fn has_data(&self, page: usize) -> bool {
        let held = self
            .state()
            .pages
            .get(&page)
            .map(|e| !matches!(e.data, Data::Zero));
        held.unwrap_or_else(|| self.lower.has_data(page))
    }

    /// Replaces page `page`'s compressed bytes (tests: a corrupt page).
    #[cfg(test)]
    pub fn corrupt(&self, page: usize) {
        if let Some(e) = self.state().pages.get_mut(&page) {
            e.data = Data::Lz4(Arc::from(&[0xffu8, 1, 2][..]));
        }
    }
}
