//! The benchmarks' data file: a table of 64-byte tuples on the machine's disk, deleted on drop.
//!
//! Tuple `i` (global index) holds its join key `i % KEY_SPACE` in bytes 0..8 and the number of
//! its page in bytes 8..16, so the join and the page scans can check every value they read.

use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use pagepilot_pager::sys::{self, PAGE};

/// Size of a tuple, as in HiPEC 5.3.
pub const TUPLE: usize = 64;
/// Tuples per page.
pub const TUPLES_PER_PAGE: usize = PAGE / TUPLE;
/// Outer keys cycle through this many values.
pub const KEY_SPACE: u64 = 1024;
/// File sizes are rounded up to this, so every `O_DIRECT` read size divides them.
const ALIGN: usize = 1 << 20;

/// Failure to create the data file.
#[derive(Debug, thiserror::Error)]
pub enum DataFileError {
    /// The directory is on tmpfs: no block device, so `O_DIRECT` and the kernel's reads would
    /// measure memory copies.
    #[error("{0} is on tmpfs; give a directory on a disk with --dir")]
    Tmpfs(PathBuf),
    /// Writing the file failed.
    #[error("creating {path}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        source: io::Error,
    },
}

/// A data file that is removed when dropped (also on error paths).
pub struct DataFile {
    path: PathBuf,
    len: usize,
}

impl DataFile {
    /// Creates a table of at least `bytes` bytes (rounded up to 1 MiB) in `dir`, written back
    /// to the disk and dropped from the page cache.
    pub fn create(dir: &Path, name: &str, bytes: usize) -> Result<DataFile, DataFileError> {
        let io_err = |path: &Path| {
            let path = path.to_path_buf();
            move |source| DataFileError::Io { path, source }
        };
        if sys::is_tmpfs(dir).map_err(io_err(dir))? {
            return Err(DataFileError::Tmpfs(dir.to_path_buf()));
        }
        let len = bytes.div_ceil(ALIGN).max(1) * ALIGN;
        let path = dir.join(format!("pagepilot-bench-{}-{name}.dat", std::process::id()));
        let df = DataFile { path, len };
        let mut file = File::create(&df.path).map_err(io_err(&df.path))?;
        let mut chunk = vec![0u8; ALIGN];
        for c in 0..len / ALIGN {
            for (p, page) in chunk.chunks_exact_mut(PAGE).enumerate() {
                fill_page((c * ALIGN / PAGE + p) as u64, page);
            }
            file.write_all(&chunk).map_err(io_err(&df.path))?;
        }
        file.sync_all().map_err(io_err(&df.path))?;
        crate::cold::make_cold(&[&df.path], false).map_err(io_err(&df.path))?;
        Ok(df)
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Its length in bytes (a multiple of 1 MiB).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Its length in pages.
    pub fn pages(&self) -> usize {
        self.len / PAGE
    }
}

impl Drop for DataFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Writes the tuples of page `page` into `buf` (one page).
pub fn fill_page(page: u64, buf: &mut [u8]) {
    for (t, tuple) in buf.chunks_exact_mut(TUPLE).enumerate() {
        let i = page * TUPLES_PER_PAGE as u64 + t as u64;
        tuple[0..8].copy_from_slice(&(i % KEY_SPACE).to_ne_bytes());
        tuple[8..16].copy_from_slice(&page.to_ne_bytes());
        tuple[16..].fill((i & 0xff) as u8);
    }
}

/// The directory for data files: `--dir` if given, else the system's temporary directory.
pub fn default_dir(dir: Option<PathBuf>) -> PathBuf {
    dir.unwrap_or_else(std::env::temp_dir)
}
