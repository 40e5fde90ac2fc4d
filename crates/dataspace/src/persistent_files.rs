//! The persistent manager's files: for a dataspace named `NAME`, in the
//! manager's directory,
//!
//! - `NAME.pages`: its bytes, page `i` at offset `i * 4096`, exactly its
//!   length long, sparse (pages never written are holes and read as zero);
//! - `NAME.meta`: a 32-byte header, written once at `create` to a
//!   temporary file (`.NAME.meta.tmp`), fsynced, then published with
//!   `link` (atomic, and never over another dataspace's header) and the
//!   directory fsynced. Its layout, little endian: magic `PPDSMETA` (8
//!   bytes), version (u32, 1), page size (u32, 4096), length in bytes
//!   (u64), FNV-1a 64 of the 24 bytes before (u64).
//!
//! The header is what makes a dataspace exist: `create` writes it last,
//! `delete` removes it first, so a crash in between leaves at worst a data
//! file without a header, which the next `create` of the name reuses.
//! Names become file names: not empty, at most [`MAX_NAME`] bytes, no `/`
//! or NUL, no leading `.` (which also rules out `.` and `..` and the
//! temporary files).

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use crate::error::{Corrupt, InvalidName};
use crate::sys::PAGE;

/// The longest name accepted, bytes.
pub const MAX_NAME: usize = 200;
const MAGIC: [u8; 8] = *b"PPDSMETA";
const VERSION: u32 = 1;
const HEADER_LEN: usize = 32;

/// Checks that `name` can name a persistent dataspace of `manager`'s.
pub(crate) fn check_name(manager: &'static str, name: &str) -> Result<(), InvalidName> {
    let bad = |why| {
        Err(InvalidName {
            manager,
            name: name.into(),
            why,
        })
    };
    if name.is_empty() {
        return bad("a name must not be empty");
    }
    if name.len() > MAX_NAME {
        return bad("a name must be at most 200 bytes");
    }
    if name.contains('/') || name.contains('\0') {
        return bad("a name must not contain '/' or NUL");
    }
    if name.starts_with('.') {
        return bad("a name must not start with '.' (no '.', '..' or hidden files)");
    }
    Ok(())
}

/// Where a dataspace's files are.
#[derive(Clone, Debug)]
pub(crate) struct Files {
    /// The header.
    pub meta: PathBuf,
    /// The pages.
    pub data: PathBuf,
    /// The header being written.
    pub tmp: PathBuf,
    /// The directory.
    pub dir: PathBuf,
}

impl Files {
    /// The files of dataspace `name` (a checked name) in `dir`.
    pub fn new(dir: &Path, name: &str) -> Self {
        Files {
            meta: dir.join(format!("{name}.meta")),
            data: dir.join(format!("{name}.pages")),
            tmp: dir.join(format!(".{name}.meta.tmp")),
            dir: dir.into(),
        }
    }
}

/// Why a dataspace's header could not be read.
#[derive(Debug)]
pub(crate) enum Lookup {
    /// There is no header: no such dataspace.
    Missing,
    /// The header or the data file is damaged.
    Corrupt(Corrupt),
    /// The system refused (the file named).
    Io(PathBuf, io::Error),
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The header of a dataspace of `len` bytes.
fn encode(len: u64) -> [u8; HEADER_LEN] {
    let mut h = [0u8; HEADER_LEN];
    h[..8].copy_from_slice(&MAGIC);
    h[8..12].copy_from_slice(&VERSION.to_le_bytes());
    h[12..16].copy_from_slice(&(PAGE as u32).to_le_bytes());
    h[16..24].copy_from_slice(&len.to_le_bytes());
    let sum = fnv1a(&h[..24]);
    h[24..].copy_from_slice(&sum.to_le_bytes());
    h
}

/// The length a header read from `path` records.
fn decode(path: &Path, bytes: &[u8]) -> Result<u64, Corrupt> {
    let corrupt = |why: String| {
        Err(Corrupt {
            path: path.into(),
            why,
        })
    };
    if bytes.len() != HEADER_LEN {
        return corrupt(format!(
            "the header has {} bytes, {HEADER_LEN} expected (truncated or overwritten)",
            bytes.len()
        ));
    }
    if bytes[..8] != MAGIC {
        return corrupt("bad magic: not a pagepilot persistent dataspace header".into());
    }
    let u32_at = |i: usize| u32::from_le_bytes(bytes[i..i + 4].try_into().expect("4 bytes"));
    let u64_at = |i: usize| u64::from_le_bytes(bytes[i..i + 8].try_into().expect("8 bytes"));
    if u64_at(24) != fnv1a(&bytes[..24]) {
        return corrupt("header checksum mismatch".into());
    }
    if u32_at(8) != VERSION {
        return corrupt(format!(
            "header version {}, only {VERSION} is known",
            u32_at(8)
        ));
    }
    if u32_at(12) as usize != PAGE {
        return corrupt(format!("page size {}, {PAGE} expected", u32_at(12)));
    }
    match u64_at(16) {
        0 => corrupt("a length of 0 bytes".into()),
        len => Ok(len),
    }
}

/// The length dataspace `files` records, its data file checked to match.
pub(crate) fn read_len(files: &Files) -> Result<u64, Lookup> {
    let mut bytes = Vec::with_capacity(HEADER_LEN);
    match File::open(&files.meta) {
        Ok(f) => f
            .take(HEADER_LEN as u64 + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| Lookup::Io(files.meta.clone(), e))?,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Err(Lookup::Missing),
        Err(e) => return Err(Lookup::Io(files.meta.clone(), e)),
    };
    let len = decode(&files.meta, &bytes).map_err(Lookup::Corrupt)?;
    let corrupt = |why| {
        Lookup::Corrupt(Corrupt {
            path: files.data.clone(),
            why,
        })
    };
    match std::fs::metadata(&files.data) {
        Ok(m) if !m.is_file() => Err(corrupt("the data file is not a regular file".into())),
        Ok(m) if m.len() != len => Err(corrupt(format!(
            "the data file has {} bytes, its header {} says {len}",
            m.len(),
            files.meta.display()
        ))),
        Ok(_) => Ok(len),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Err(corrupt(format!(
            "the data file is missing (its header {} is there)",
            files.meta.display()
        ))),
        Err(e) => Err(Lookup::Io(files.data.clone(), e)),
    }
}

/// Makes `files`'s data file, `len` bytes of holes (or, with `from`, a copy
/// of that file's `len` bytes), durable, and publishes its header. Errors
/// name the file; the data file is removed again on failure.
/// `AlreadyExists`: the header is there (the name is taken).
pub(crate) fn make(
    files: &Files,
    len: u64,
    from: Option<&File>,
) -> Result<(), (PathBuf, io::Error)> {
    std::fs::create_dir_all(&files.dir).map_err(|e| (files.dir.clone(), e))?;
    if files.meta.exists() {
        return Err((files.meta.clone(), io::ErrorKind::AlreadyExists.into()));
    }
    let data_err = |e| (files.data.clone(), e);
    let made = (|| {
        // A data file without a header is a `create` that did not finish.
        let data = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&files.data)
            .map_err(data_err)?;
        data.set_len(len).map_err(data_err)?;
        if let Some(from) = from {
            crate::sys::copy_range(from, &data, len).map_err(data_err)?;
        }
        data.sync_all().map_err(data_err)?;
        publish(files, len)
    })();
    if made.is_err() {
        let _ = std::fs::remove_file(&files.data);
    }
    made
}

/// Writes the header of a `len`-byte dataspace to the temporary file,
/// fsyncs it, links it as the header (refused if one is there) and fsyncs
/// the directory.
fn publish(files: &Files, len: u64) -> Result<(), (PathBuf, io::Error)> {
    let tmp_err = |e| (files.tmp.clone(), e);
    let mut tmp = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&files.tmp)
        .map_err(tmp_err)?;
    tmp.write_all(&encode(len)).map_err(tmp_err)?;
    tmp.sync_all().map_err(tmp_err)?;
    let linked = std::fs::hard_link(&files.tmp, &files.meta).map_err(|e| (files.meta.clone(), e));
    let _ = std::fs::remove_file(&files.tmp);
    linked?;
    sync_dir(&files.dir).map_err(|e| (files.dir.clone(), e))
}

/// Makes the directory's entries durable.
pub(crate) fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_header_round_trips_and_any_flipped_byte_is_refused() {
        let h = encode(12345);
        assert_eq!(decode(Path::new("x"), &h), Ok(12345));
        for i in 0..HEADER_LEN {
            let mut bad = h;
            bad[i] ^= 0x40;
            assert!(decode(Path::new("x"), &bad).is_err(), "byte {i}");
        }
        let short = decode(Path::new("x.meta"), &h[..20]).unwrap_err();
        assert!(short.to_string().contains("x.meta"), "{short}");
        assert!(short.to_string().contains("20 bytes"), "{short}");
    }

    #[test]
    fn test_names_that_are_not_one_file_name_are_refused() {
        for bad in [
            "",
            "a/b",
            "..",
            ".",
            ".hidden",
            "a\0b",
            &"x".repeat(MAX_NAME + 1),
        ] {
            assert!(check_name("persistent", bad).is_err(), "{bad:?}");
        }
        for good in ["foo", "a.b", "x-y_z 1", &"x".repeat(MAX_NAME)] {
            assert!(check_name("persistent", good).is_ok(), "{good:?}");
        }
    }
}
