//! `pagepilot dataspaces`: the persistent dataspaces of a directory (the
//! persistent manager's, `docs/dataspaces.md`): list them with their length
//! and the space they take, create, inspect and delete one.

use std::fs::File;
use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;

use pagepilot_pager::dataspace::{
    CreateError, DataspaceId, DeleteError, IdentifyError, Manager, PersistentManager, PAGE,
};
use pagepilot_policy::chain;
use serde::Serialize;

use super::CmdResult;

/// `pagepilot dataspaces ...`.
#[derive(clap::Subcommand)]
pub enum Command {
    /// Every dataspace of the directory: name, length, bytes on disk (the
    /// data file is sparse: pages never written take none).
    List(ListArgs),
    /// Creates a dataspace of zero bytes.
    Create(CreateArgs),
    /// Deletes a dataspace (refused while it is mapped).
    Delete(NameArgs),
    /// One dataspace: length, pages written, bytes on disk, header check.
    Info(InfoArgs),
}

/// The directory, as every subcommand takes it.
#[derive(clap::Args)]
pub struct DirArg {
    /// The dataspaces' directory [default: $PAGEPILOT_HOME/dataspaces, else
    /// $XDG_DATA_HOME/pagepilot/dataspaces, else
    /// $HOME/.local/share/pagepilot/dataspaces].
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
}

/// Arguments of `pagepilot dataspaces list`.
#[derive(clap::Args)]
pub struct ListArgs {
    #[command(flatten)]
    dir: DirArg,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
}

/// Arguments of `pagepilot dataspaces create`.
#[derive(clap::Args)]
pub struct CreateArgs {
    /// Its name (a file name: no '/', not starting with '.').
    name: String,
    /// Its length: bytes, with K, M, G or T (powers of 1024), e.g. 64M.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    size: u64,
    #[command(flatten)]
    dir: DirArg,
}

/// Arguments naming one dataspace.
#[derive(clap::Args)]
pub struct NameArgs {
    /// Its name.
    name: String,
    #[command(flatten)]
    dir: DirArg,
}

/// Arguments of `pagepilot dataspaces info`.
#[derive(clap::Args)]
pub struct InfoArgs {
    #[command(flatten)]
    named: NameArgs,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    format: Format,
}

/// How a listing or a dataspace is printed.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Format {
    /// A table (list) or one line per field (info).
    Text,
    /// JSON.
    Json,
}

/// Why a `dataspaces` command failed.
#[derive(Debug, thiserror::Error)]
pub enum DataspacesError {
    /// No `--dir` and no default directory.
    #[error(
        "no directory for persistent dataspaces: give --dir, or set PAGEPILOT_HOME, \
         XDG_DATA_HOME or HOME"
    )]
    NoDir,
    /// The directory could not be read.
    #[error("cannot list {}", dir.display())]
    List {
        /// The directory.
        dir: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The dataspace does not exist.
    #[error("no dataspace {name:?} in {}", dir.display())]
    Missing {
        /// Its name.
        name: String,
        /// The directory.
        dir: PathBuf,
    },
    /// The manager refused the name, or found the dataspace damaged.
    #[error("dataspace {name:?} in {}", dir.display())]
    Identify {
        /// Its name.
        name: String,
        /// The directory.
        dir: PathBuf,
        /// The manager's reason.
        source: IdentifyError,
    },
    /// It could not be created.
    #[error("cannot create dataspace {name:?} in {}", dir.display())]
    Create {
        /// Its name.
        name: String,
        /// The directory.
        dir: PathBuf,
        /// The manager's reason.
        source: CreateError,
    },
    /// It could not be deleted.
    #[error("cannot delete dataspace {name:?} in {}", dir.display())]
    Delete {
        /// Its name.
        name: String,
        /// The directory.
        dir: PathBuf,
        /// The manager's reason.
        source: DeleteError,
    },
    /// Its data file could not be examined.
    #[error("cannot examine {}", path.display())]
    Examine {
        /// The data file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Some dataspaces of a listing are damaged (each listed).
    #[error("{} dataspace(s) in {} are damaged: {}", names.len(), dir.display(), names.join(", "))]
    Damaged {
        /// The directory.
        dir: PathBuf,
        /// The damaged ones.
        names: Vec<String>,
    },
}

/// Runs `pagepilot dataspaces ...`.
pub fn run(command: Command) -> CmdResult {
    match command {
        Command::List(a) => list(a),
        Command::Create(a) => {
            let manager = manager(&a.dir)?;
            manager
                .create_named(&a.name, a.size)
                .map_err(|source| DataspacesError::Create {
                    name: a.name.clone(),
                    dir: manager.dir().into(),
                    source,
                })?;
            println!(
                "created dataspace {:?} of {} bytes in {}",
                a.name,
                a.size,
                manager.dir().display()
            );
            Ok(())
        }
        Command::Delete(a) => {
            let manager = manager(&a.dir)?;
            let id = DataspaceId::Name(a.name.clone());
            manager.delete(&id).map_err(|source| match source {
                DeleteError::NoSuch(_) => DataspacesError::Missing {
                    name: a.name.clone(),
                    dir: manager.dir().into(),
                },
                source => DataspacesError::Delete {
                    name: a.name.clone(),
                    dir: manager.dir().into(),
                    source,
                },
            })?;
            println!(
                "deleted dataspace {:?} from {}",
                a.name,
                manager.dir().display()
            );
            Ok(())
        }
        Command::Info(a) => {
            let manager = manager(&a.named.dir)?;
            let info = examine(&manager, &a.named.name)?;
            let mut out = std::io::stdout().lock();
            match a.format {
                Format::Json => writeln!(out, "{}", serde_json::to_string_pretty(&info)?)?,
                Format::Text => {
                    writeln!(out, "name:          {}", info.name)?;
                    writeln!(out, "directory:     {}", manager.dir().display())?;
                    writeln!(
                        out,
                        "length:        {} bytes ({} pages)",
                        info.len, info.pages
                    )?;
                    writeln!(out, "pages written: {}", info.pages_written)?;
                    writeln!(out, "on disk:       {} bytes", info.bytes_on_disk)?;
                    writeln!(out, "header:        {}", info.header)?;
                }
            }
            Ok(())
        }
    }
}

/// The manager of `--dir`, else of the default directory.
fn manager(dir: &DirArg) -> Result<PersistentManager, DataspacesError> {
    dir.dir
        .clone()
        .or_else(PersistentManager::default_dir)
        .map(PersistentManager::new)
        .ok_or(DataspacesError::NoDir)
}

/// What `info` and `list` say of a dataspace.
#[derive(Debug, Serialize)]
struct Info {
    /// Its name.
    name: String,
    /// Its length, bytes.
    len: u64,
    /// Its length, pages.
    pages: u64,
    /// Pages holding data in the data file (written at least once; the
    /// rest are holes and read as zero).
    pages_written: u64,
    /// Bytes the data file takes on disk.
    bytes_on_disk: u64,
    /// "ok": the header's magic, version, page size and checksum are
    /// right and the data file has the length it records.
    header: &'static str,
}

/// Checks dataspace `name`'s header and data file and measures it.
fn examine(manager: &PersistentManager, name: &str) -> Result<Info, DataspacesError> {
    let identity =
        manager
            .identify(&DataspaceId::Name(name.into()))
            .map_err(|source| match source {
                IdentifyError::NoSuch(_) => DataspacesError::Missing {
                    name: name.into(),
                    dir: manager.dir().into(),
                },
                source => DataspacesError::Identify {
                    name: name.into(),
                    dir: manager.dir().into(),
                    source,
                },
            })?;
    let path = manager.dir().join(format!("{name}.pages"));
    let examine = |source| DataspacesError::Examine {
        path: path.clone(),
        source,
    };
    let file = File::open(&path).map_err(examine)?;
    let meta = file.metadata().map_err(examine)?;
    Ok(Info {
        name: name.into(),
        len: identity.len,
        pages: identity.len.div_ceil(PAGE as u64),
        pages_written: pages_with_data(&file, identity.len).map_err(examine)?,
        bytes_on_disk: meta.blocks() * 512,
        header: "ok",
    })
}

/// The pages of `file`'s first `len` bytes that hold data (not holes),
/// found with `SEEK_DATA` and `SEEK_HOLE`.
fn pages_with_data(file: &File, len: u64) -> std::io::Result<u64> {
    let fd = file.as_raw_fd();
    let seek = |at: u64, whence| -> std::io::Result<Option<u64>> {
        // SAFETY: lseek on a descriptor we own; it only moves the file offset.
        let r = unsafe { libc::lseek(fd, at as libc::off_t, whence) };
        if r >= 0 {
            return Ok(Some(r as u64));
        }
        let e = std::io::Error::last_os_error();
        match e.raw_os_error() {
            // No data at or after `at`.
            Some(libc::ENXIO) => Ok(None),
            _ => Err(e),
        }
    };
    let page = PAGE as u64;
    let (mut at, mut pages) = (0u64, 0u64);
    while at < len {
        let Some(data) = seek(at, libc::SEEK_DATA)? else {
            break;
        };
        if data >= len {
            break;
        }
        let hole = seek(data, libc::SEEK_HOLE)?.unwrap_or(len).min(len);
        // The pages the extent touches; the search goes on from the page
        // after its last, so none is counted twice.
        pages += hole.div_ceil(page) - data / page;
        at = hole.div_ceil(page) * page;
    }
    Ok(pages)
}

/// `pagepilot dataspaces list`.
fn list(args: ListArgs) -> CmdResult {
    let manager = manager(&args.dir)?;
    let names = manager.names().map_err(|source| DataspacesError::List {
        dir: manager.dir().into(),
        source,
    })?;
    let mut rows = Vec::new();
    let mut damaged = Vec::new();
    for name in names {
        match examine(&manager, &name) {
            Ok(info) => rows.push(Ok(info)),
            Err(e) => {
                damaged.push(name.clone());
                rows.push(Err((name, chain(&e).to_string())));
            }
        }
    }
    let mut out = std::io::stdout().lock();
    match args.format {
        Format::Json => {
            let json: Vec<serde_json::Value> = rows
                .iter()
                .map(|r| match r {
                    Ok(info) => serde_json::to_value(info).expect("plain fields"),
                    Err((name, error)) => serde_json::json!({ "name": name, "error": error }),
                })
                .collect();
            writeln!(out, "{}", serde_json::to_string_pretty(&json)?)?;
        }
        Format::Text => {
            writeln!(
                out,
                "{:<24} {:>14} {:>14} {:>10}",
                "NAME", "LENGTH", "ON DISK", "WRITTEN"
            )?;
            for r in &rows {
                match r {
                    Ok(i) => writeln!(
                        out,
                        "{:<24} {:>14} {:>14} {:>10}",
                        i.name, i.len, i.bytes_on_disk, i.pages_written
                    )?,
                    Err((name, error)) => writeln!(out, "{name:<24} DAMAGED: {error}")?,
                }
            }
        }
    }
    out.flush()?;
    if !damaged.is_empty() {
        return Err(DataspacesError::Damaged {
            dir: manager.dir().into(),
            names: damaged,
        }
        .into());
    }
    Ok(())
}

/// A length as `pagepilot_run::parse_size` reads it (bytes, or a number
/// with K, M, G or T), more than zero.
fn parse_size(s: &str) -> Result<u64, String> {
    match pagepilot_run::parse_size(s) {
        Ok(0) => Err(format!("`{s}`: a dataspace of 0 bytes")),
        r => r.map_err(|_| {
            format!("`{s}` is not a size (a number of bytes with K, M, G or T, e.g. 64M)")
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_bytes_with_binary_units() {
        assert_eq!(parse_size("64M"), Ok(64 << 20));
        assert_eq!(parse_size("1GiB"), Ok(1 << 30));
        assert_eq!(parse_size("4k"), Ok(4096));
        assert_eq!(parse_size("1000"), Ok(1000));
        assert!(parse_size("0").is_err());
        assert!(parse_size("lots").is_err());
        assert!(parse_size("99999999999T").is_err());
    }

    #[test]
    fn pages_with_data_counts_the_written_pages_of_a_sparse_file() {
        use std::os::unix::fs::FileExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .unwrap();
        let len = 4096 * 1024;
        f.set_len(len).unwrap();
        assert_eq!(pages_with_data(&f, len).unwrap(), 0);
        for page in [0u64, 5, 6, 700] {
            f.write_all_at(&[1u8; 4096], page * 4096).unwrap();
        }
        f.sync_all().unwrap();
        // Filesystems allocate in blocks of at most a page here (ext4, xfs,
        // btrfs, tmpfs): exactly the pages written.
        assert_eq!(pages_with_data(&f, len).unwrap(), 4);
    }
}
