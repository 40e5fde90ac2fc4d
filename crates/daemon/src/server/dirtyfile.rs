//! A client's dirty map read from its file (a memfd, by `pread`), a
//! window of pages at a time and only the words that cover the pages
//! asked: the write-back asks for the pages where the memory file has
//! data, so that a map of a sparse region costs what the region's data
//! does, not what its bits do. Each window is read as a [`DirtyMap`] of
//! its own, so that the bitmap has one interpretation, the protocol
//! crate's.

use std::fs::File;
use std::sync::atomic::AtomicU64;

use pagepilot_protocol::{DirtyMap, DIRTY_MAGIC};

use super::files::{dirty_header, read_at_most, regular, FilesError, MAX_DIRTY_BYTES};

/// Words of a dirty map read in one go: 64 KiB, the pages of 2 GiB, so
/// that the daemon's memory does not grow with a client's map.
const WINDOW_WORDS: u64 = 8192;
/// Bytes of the map's header (magic, pages) before the bitmap.
const HEADER_BYTES: u64 = 16;

/// A dirty map file whose header was checked.
#[derive(Debug)]
pub(super) struct DirtyFile<'f> {
    file: &'f File,
    pages: u64,
    /// Words read at most by one [`DirtyFile::window`].
    window_words: u64,
    bytes: Vec<u8>,
    words: Vec<AtomicU64>,
    /// Bytes of the bitmap read so far.
    pub(super) bytes_read: u64,
}

/// The dirty pages among some of a region's, read from its map.
#[derive(Debug)]
pub(super) struct Window<'a> {
    /// The first page asked.
    first: u64,
    /// The page after the last covered.
    end: u64,
    /// The page of bit 0 of the first word read.
    base: u64,
    map: DirtyMap<'a>,
}

impl<'f> DirtyFile<'f> {
    /// Checks the map's header against the file's size now (it may have
    /// shrunk since registration: a header claiming more pages than the
    /// file holds refuses the whole map, nothing is guessed).
    pub(super) fn open(file: &'f File) -> Result<DirtyFile<'f>, FilesError> {
        let size = regular(file, "dirty")?.len().min(MAX_DIRTY_BYTES);
        let pages = dirty_header(file, size)?;
        Ok(DirtyFile {
            file,
            pages,
            window_words: WINDOW_WORDS,
            bytes: Vec::new(),
            words: Vec::new(),
            bytes_read: 0,
        })
    }

    /// The same map read `words` words at a time at most (tests of windows
    /// without gigabytes of data).
    #[cfg(test)]
    pub(super) fn with_window(self, words: u64) -> DirtyFile<'f> {
        DirtyFile {
            window_words: words.max(1),
            ..self
        }
    }

    /// The pages the map covers.
    pub(super) fn pages(&self) -> u64 {
        self.pages
    }

    /// Reads the words covering pages `first..end` (`first < end`), at
    /// most a window's worth: the window returned covers `first` to its
    /// [`Window::end`], which is past `first` and at most `end` (and the
    /// map's pages). Words the file no longer holds (shrunk since) read
    /// as clean pages.
    pub(super) fn window(&mut self, first: u64, end: u64) -> Result<Window<'_>, FilesError> {
        let base = first / 64 * 64;
        let end = end
            .min(self.pages)
            .min(base + self.window_words * 64)
            .max(first + 1);
        let len = usize::try_from((end - base).div_ceil(64) * 8).unwrap_or(0);
        if self.bytes.len() < len {
            self.bytes.resize(len, 0);
        }
        let got = read_at_most(self.file, &mut self.bytes[..len], HEADER_BYTES + base / 8)
            .map_err(FilesError::DirtyRead)?;
        self.bytes_read += got as u64;
        let whole = got / 8 * 8;
        let covered = (end - base).min(whole as u64 * 8);
        self.words.clear();
        self.words.push(AtomicU64::new(DIRTY_MAGIC));
        self.words.push(AtomicU64::new(covered));
        self.words.extend(
            self.bytes[..whole]
                .chunks_exact(8)
                .map(|w| AtomicU64::new(u64::from_le_bytes(w.try_into().unwrap_or([0; 8])))),
        );
        Ok(Window {
            first,
            end,
            base,
            map: DirtyMap::open(&self.words)?,
        })
    }
}

impl Window<'_> {
    /// The page after the last this window covers.
    pub(super) fn end(&self) -> u64 {
        self.end
    }

    /// The dirty pages of the window, ascending.
    pub(super) fn dirty_pages(&self) -> impl Iterator<Item = u64> + '_ {
        self.map
            .dirty_pages()
            .map(|p| self.base + p)
            .filter(|&p| p >= self.first)
    }
}
