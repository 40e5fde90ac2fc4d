//! Several dataspaces attached at page offsets of one region, as one page
//! store: each read and write goes to the dataspace holding the page
//! (SawMill's region map, at the granularity of a region's pages). Pages
//! no dataspace is attached at read as zero and are never stored.

use std::io;
use std::os::fd::RawFd;

use crate::sys::PAGE;
use crate::PageStore;

/// One dataspace attached in a region: its pages `offset..offset+pages`
/// are the region's pages `at..at+pages`.
#[derive(Debug)]
pub struct Attached {
    /// The region's first page it covers.
    pub at: usize,
    /// How many pages.
    pub pages: usize,
    /// The dataspace's page at `at`.
    pub offset: usize,
    /// The dataspace, opened.
    pub store: Box<dyn PageStore>,
}

impl Attached {
    fn end(&self) -> usize {
        self.at + self.pages
    }
}

/// Why a set of attachments cannot make a region.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum AttachError {
    /// Nothing attached.
    #[error("a region needs at least one attached dataspace")]
    Empty,
    /// An attachment of no pages.
    #[error("attachment {index} covers no pages")]
    NoPages {
        /// Its place in the list.
        index: usize,
    },
    /// Two attachments cover the same page.
    #[error("attachments {first} and {second} both cover page {page} of the region")]
    Overlap {
        /// The earlier one in the list.
        first: usize,
        /// The later one.
        second: usize,
        /// A page both cover.
        page: usize,
    },
    /// An attachment reaches beyond its dataspace.
    #[error("attachment {index} reaches page {end} of its dataspace, which has {pages} pages")]
    BeyondDataspace {
        /// Its place in the list.
        index: usize,
        /// The dataspace page after its last.
        end: usize,
        /// The dataspace's pages.
        pages: usize,
    },
}

/// The attached dataspaces of a region, routed by page.
#[derive(Debug)]
pub struct Routed {
    /// Sorted by `at`, not overlapping.
    parts: Vec<Attached>,
}

impl Routed {
    /// The region made of `parts` (in any order): refused if one is empty,
    /// two overlap, or one reaches beyond its dataspace.
    pub fn new(parts: Vec<Attached>) -> Result<Self, AttachError> {
        if parts.is_empty() {
            return Err(AttachError::Empty);
        }
        for (index, p) in parts.iter().enumerate() {
            if p.pages == 0 {
                return Err(AttachError::NoPages { index });
            }
            let pages = (p.store.size() as usize).div_ceil(PAGE);
            if p.offset + p.pages > pages {
                return Err(AttachError::BeyondDataspace {
                    index,
                    end: p.offset + p.pages,
                    pages,
                });
            }
        }
        let mut order: Vec<usize> = (0..parts.len()).collect();
        order.sort_by_key(|&i| parts[i].at);
        for w in order.windows(2) {
            let (a, b) = (&parts[w[0]], &parts[w[1]]);
            if b.at < a.end() {
                return Err(AttachError::Overlap {
                    first: w[0].min(w[1]),
                    second: w[0].max(w[1]),
                    page: b.at,
                });
            }
        }
        let mut parts = parts;
        parts.sort_by_key(|p| p.at);
        Ok(Routed { parts })
    }

    /// The region's pages: up to the end of the last attachment.
    pub fn pages(&self) -> usize {
        self.parts.last().map_or(0, Attached::end)
    }

    /// The attachments, by their first page.
    pub fn parts(&self) -> &[Attached] {
        &self.parts
    }

    /// The attachment holding `page`, or where the gap holding it ends.
    fn route(&self, page: usize) -> Result<&Attached, usize> {
        // The last attachment starting at or before `page`.
        let i = self.parts.partition_point(|p| p.at <= page);
        match i.checked_sub(1).map(|i| &self.parts[i]) {
            Some(p) if page < p.end() => Ok(p),
            _ => Err(self.parts.get(i).map_or(usize::MAX, |p| p.at)),
        }
    }

    /// The pieces of `first..first+pages`: the attachment or gap, the
    /// region page it starts at and its length.
    fn pieces(
        &self,
        first: usize,
        pages: usize,
    ) -> impl Iterator<Item = (Option<&Attached>, usize, usize)> + '_ {
        let end = first + pages;
        let mut at = first;
        std::iter::from_fn(move || {
            if at >= end {
                return None;
            }
            let (part, until) = match self.route(at) {
                Ok(p) => (Some(p), p.end()),
                Err(next) => (None, next),
            };
            let n = until.min(end) - at;
            let piece = (part, at, n);
            at += n;
            Some(piece)
        })
    }
}

impl PageStore for Routed {
    unsafe fn read(&self, first: usize, pages: usize, dst: *mut u8) -> io::Result<usize> {
        let mut have = 0;
        for (part, at, n) in self.pieces(first, pages) {
            // SAFETY: within the caller's buffer of `pages` pages.
            let dst = unsafe { dst.add((at - first) * PAGE) };
            let got = match part {
                // SAFETY: a whole-page part of the caller's buffer, which
                // the caller lends us for the call.
                Some(p) => unsafe { p.store.read(p.offset + (at - p.at), n, dst) }?,
                None => {
                    // SAFETY: as above; a gap reads as zero.
                    unsafe { dst.write_bytes(0, n * PAGE) };
                    n
                }
            };
            have += got;
            if got < n {
                break;
            }
        }
        Ok(have)
    }

    unsafe fn write(&self, first: usize, pages: usize, src: *const u8) -> io::Result<()> {
        for (part, at, n) in self.pieces(first, pages) {
            if let Some(p) = part {
                // SAFETY: within the caller's buffer of `pages` pages.
                let src = unsafe { src.add((at - first) * PAGE) };
                // SAFETY: the caller's guarantee, for this part of it.
                unsafe { p.store.write(p.offset + (at - p.at), n, src) }?;
            }
        }
        Ok(())
    }

    fn sync(&self) -> io::Result<()> {
        self.parts.iter().try_for_each(|p| p.store.sync())
    }

    fn size(&self) -> u64 {
        (self.pages() * PAGE) as u64
    }

    fn direct(&self) -> bool {
        self.parts.iter().any(|p| p.store.direct())
    }

    fn readaround_pages(&self) -> Option<usize> {
        self.parts
            .iter()
            .filter_map(|p| p.store.readaround_pages())
            .max()
    }

    fn has_data(&self, page: usize) -> bool {
        self.route(page)
            .is_ok_and(|p| p.store.has_data(p.offset + (page - p.at)))
    }

    fn read_source(&self, first: usize, pages: usize) -> Option<(RawFd, u64)> {
        let p = self.route(first).ok()?;
        if first + pages > p.end() {
            return None;
        }
        p.store.read_source(p.offset + (first - p.at), pages)
    }

    unsafe fn read_cached(
        &self,
        first: usize,
        pages: usize,
        dst: *mut u8,
    ) -> Option<io::Result<usize>> {
        let p = self.route(first).ok()?;
        if first + pages > p.end() {
            return None;
        }
        // SAFETY: the caller's guarantee, passed on (one part holds them all).
        unsafe { p.store.read_cached(p.offset + (first - p.at), pages, dst) }
    }

    fn bookkeeping_bytes(&self) -> usize {
        self.parts
            .iter()
            .map(|p| p.store.bookkeeping_bytes())
            .sum::<usize>()
            + self.parts.capacity() * std::mem::size_of::<Attached>()
    }

    fn cached_bytes_read(&self) -> u64 {
        self.parts.iter().map(|p| p.store.cached_bytes_read()).sum()
    }

    fn persistent(&self) -> bool {
        self.parts.iter().any(|p| p.store.persistent())
    }

    fn into_any(self: Box<Self>) -> Box<dyn std::any::Any> {
        self
    }
}
