//! Opening a trace file: transparent zstd decompression and a peek at the
//! first bytes for format detection.

use std::fs::File;
use std::io::{BufRead, BufReader, Cursor, Read};
use std::path::Path;

use super::TraceError;

/// zstd frame magic number, little-endian on disk.
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];
/// How much decompressed content format detection looks at.
const HEAD: usize = 4096;
/// Read buffer size: large enough that line carry-over is rare.
pub(crate) const BUFFER: usize = 1 << 18;

/// An opened trace: its (decompressed) content and what is known about it.
pub(crate) struct Source {
    /// The content, from the first byte.
    pub reader: Box<dyn BufRead>,
    /// Up to the first 4 KiB of content, for detection.
    pub head: Vec<u8>,
    /// The content length when known without reading it (uncompressed files).
    pub size_hint: Option<u64>,
}

/// Whether `path` names a zstd-compressed file.
pub(crate) fn is_zst_name(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("zst"))
}

/// Opens `path`, decompressing it if it starts with a zstd frame.
pub(crate) fn open(path: &Path) -> Result<Source, TraceError> {
    let io = |e| TraceError::io(path, e);
    let mut file = File::open(path).map_err(io)?;
    let meta = file.metadata().map_err(io)?;
    if meta.is_dir() {
        return Err(io(std::io::Error::new(
            std::io::ErrorKind::IsADirectory,
            "is a directory",
        )));
    }
    let mut magic = Vec::with_capacity(4);
    (&mut file).take(4).read_to_end(&mut magic).map_err(io)?;
    let start = Cursor::new(magic.clone());
    if magic == ZSTD_MAGIC {
        let decoder = zstd::Decoder::new(start.chain(file)).map_err(io)?;
        finish(Box::new(decoder), None, path)
    } else {
        finish(Box::new(start.chain(file)), Some(meta.len()), path)
    }
}

fn finish(
    mut inner: Box<dyn Read>,
    size_hint: Option<u64>,
    path: &Path,
) -> Result<Source, TraceError> {
    let mut head = Vec::with_capacity(HEAD);
    (&mut inner)
        .take(HEAD as u64)
        .read_to_end(&mut head)
        .map_err(|e| TraceError::io(path, e))?;
    let reader = BufReader::with_capacity(BUFFER, Cursor::new(head.clone()).chain(inner));
    Ok(Source {
        reader: Box::new(reader),
        head,
        size_hint,
    })
}
