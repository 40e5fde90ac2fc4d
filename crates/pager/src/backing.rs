//! What a region is backed by, and opening it: the pager asks the
//! dataspace managers of `pagepilot-dataspace` (a [`FileManager`] for a
//! file, an [`AnonymousManager`] for anonymous memory, any manager for
//! dataspaces attached at offsets) for the page store its faults are
//! served from.

use std::path::PathBuf;
use std::sync::Arc;

use pagepilot_dataspace::{
    Access, AnonymousManager, Attached, CreateError, DataspaceId, FileManager, Manager, NoSuch,
    OpenError, Opened, PageStore, Routed, PAGE,
};

use crate::error::MapError;

/// What a region is backed by.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Backing {
    /// A file, mapped read-only or read-write.
    File {
        /// The file.
        path: PathBuf,
        /// Whether the application may write (dirty pages are written back).
        writable: bool,
    },
    /// Zero-filled memory of `len` bytes, spilled to a swap file of pagepilot's own.
    Anonymous {
        /// Length in bytes.
        len: usize,
    },
    /// Dataspaces attached at offsets of the region, each opened from its
    /// manager (SawMill's region map): a fault is served by the dataspace
    /// attached where it falls; pages between attachments read as zero.
    /// The region ends with its last attachment; it is writable when every
    /// attachment is.
    Dataspaces(Vec<Attachment>),
}

/// A dataspace attached in a region: its bytes `offset..offset+len` appear
/// at the region's bytes `at..at+len`.
#[derive(Clone)]
pub struct Attachment {
    /// The dataspace's manager.
    pub manager: Arc<dyn Manager>,
    /// The dataspace.
    pub id: DataspaceId,
    /// Read-only or read-write.
    pub access: Access,
    /// Where in the region, bytes (a whole number of pages).
    pub at: usize,
    /// Where in the dataspace, bytes (a whole number of pages).
    pub offset: u64,
    /// How many bytes (`None`: to the dataspace's end).
    pub len: Option<usize>,
}

impl Attachment {
    /// All of dataspace `id`, read-write, at the region's start.
    pub fn whole(manager: Arc<dyn Manager>, id: DataspaceId) -> Self {
        Attachment {
            manager,
            id,
            access: Access::ReadWrite,
            at: 0,
            offset: 0,
            len: None,
        }
    }

    /// The same, at byte `at` of the region.
    pub fn at(mut self, at: usize) -> Self {
        self.at = at;
        self
    }

    /// The same, from byte `offset` of the dataspace, `len` bytes.
    pub fn range(mut self, offset: u64, len: usize) -> Self {
        self.offset = offset;
        self.len = Some(len);
        self
    }

    /// The same, read-only.
    pub fn read_only(mut self) -> Self {
        self.access = Access::ReadOnly;
        self
    }
}

impl std::fmt::Debug for Attachment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Attachment")
            .field("manager", &self.manager.key())
            .field("id", &self.id)
            .field("access", &self.access)
            .field("at", &self.at)
            .field("offset", &self.offset)
            .field("len", &self.len)
            .finish()
    }
}

impl PartialEq for Attachment {
    fn eq(&self, other: &Self) -> bool {
        self.manager.key() == other.manager.key()
            && (&self.id, self.access, self.at, self.offset, self.len)
                == (&other.id, other.access, other.at, other.offset, other.len)
    }
}

impl Eq for Attachment {}

/// A region's backing, opened.
pub(crate) struct Opening {
    /// Where its faults are served from.
    pub store: Box<dyn PageStore>,
    /// Whether the application may write.
    pub writable: bool,
    /// The region's pages that must stay resident (pinned dataspaces').
    pub pinned: Vec<std::ops::Range<usize>>,
    /// Which dataspace each range of the region's pages is attached to.
    pub map: Vec<Mapped>,
}

/// An entry of the process's region map: an address range and the
/// dataspace attached there (see [`crate::region_map`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mapped {
    /// The range's first byte.
    pub start: usize,
    /// The byte after its last.
    pub end: usize,
    /// The dataspace's manager.
    pub manager: &'static str,
    /// The dataspace.
    pub id: DataspaceId,
    /// The dataspace's byte at `start`.
    pub offset: u64,
}

impl Backing {
    /// Opens the dataspace through its manager: the page store and whether
    /// the application may write. `want` is the least
    /// length of a file; `swap_dir` holds an anonymous region's swap file.
    pub(crate) fn open(
        &self,
        want: Option<usize>,
        swap_dir: Option<&std::path::Path>,
    ) -> Result<Opening, MapError> {
        let whole = |(store, writable): (Box<dyn PageStore>, bool), manager, id| {
            let pages = (store.size() as usize).div_ceil(PAGE);
            Opening {
                pinned: std::iter::once(0..pages)
                    .filter(|_| store.pinned())
                    .collect(),
                map: vec![Mapped {
                    start: 0,
                    end: pages * PAGE,
                    manager,
                    id,
                    offset: 0,
                }],
                store,
                writable,
            }
        };
        match self {
            Backing::File { path, writable } => {
                let id = DataspaceId::Path(path.clone());
                let access = Access::writable(*writable);
                let store = FileManager
                    .open(&id, access, want.map(|w| w as u64))
                    .map_err(map_open)?;
                Ok(whole((store, *writable), FileManager::NAME, id))
            }
            Backing::Anonymous { len } => {
                let dir = swap_dir.map_or_else(std::env::temp_dir, Into::into);
                // A manager of the region's own: the store outlives it and
                // takes its dataspace with it when the region goes.
                let anon = AnonymousManager::new(&dir);
                let swap = |source| MapError::Swap { dir, source };
                let id = anon.create(None, *len as u64).map_err(|e| match e {
                    CreateError::Io { source, .. } => swap(source),
                    e => swap(std::io::Error::other(e)),
                })?;
                let store = anon.open(&id, Access::ReadWrite, None)?;
                Ok(whole((store, true), AnonymousManager::NAME, id))
            }
            Backing::Dataspaces(list) => attach(list),
        }
    }
}

/// Opens each attached dataspace from its manager; one attachment of a
/// whole dataspace at the region's start is served directly, several are
/// routed by page.
fn attach(list: &[Attachment]) -> Result<Opening, MapError> {
    let bad = |why: String| MapError::Attachments(why);
    let writable = list.iter().all(|a| a.access == Access::ReadWrite);
    if !writable && list.iter().any(|a| a.access == Access::ReadWrite) {
        return Err(bad(
            "read-only and read-write attachments in one region".into()
        ));
    }
    let mut parts = Vec::with_capacity(list.len());
    for (index, a) in list.iter().enumerate() {
        let aligned = |what, v: u64| {
            if v.is_multiple_of(PAGE as u64) {
                Ok(())
            } else {
                Err(bad(format!(
                    "attachment {index}: {what} {v} is not a whole number of pages"
                )))
            }
        };
        aligned("region offset", a.at as u64)?;
        aligned("dataspace offset", a.offset)?;
        let at_least = a.len.map(|l| a.offset + l as u64);
        let store = Opened::open(a.manager.clone(), a.id.clone(), a.access, at_least).map_err(
            |source| MapError::Attach {
                index,
                manager: a.manager.name(),
                source,
            },
        )?;
        let size = store.size();
        let len = match a.len {
            Some(len) => len as u64,
            None => size
                .checked_sub(a.offset)
                .filter(|&l| l > 0)
                .ok_or_else(|| {
                    bad(format!(
                    "attachment {index}: offset {} is at or beyond the end of {} ({size} bytes)",
                    a.offset, a.id
                ))
                })?,
        };
        parts.push(Attached {
            at: a.at / PAGE,
            pages: (len as usize).div_ceil(PAGE),
            offset: (a.offset / PAGE as u64) as usize,
            store: Box::new(store),
        });
    }
    let map = parts
        .iter()
        .zip(list)
        .map(|(p, a)| Mapped {
            start: p.at * PAGE,
            end: (p.at + p.pages) * PAGE,
            manager: a.manager.name(),
            id: a.id.clone(),
            offset: a.offset,
        })
        .collect();
    let pinned = parts
        .iter()
        .filter(|p| p.store.pinned())
        .map(|p| p.at..p.at + p.pages)
        .collect();
    let direct = matches!(&parts[..], [p] if p.at == 0 && p.offset == 0
        && p.pages == (p.store.size() as usize).div_ceil(PAGE));
    let store: Box<dyn PageStore> = if direct {
        parts.pop().expect("one").store
    } else {
        Box::new(Routed::new(parts).map_err(|e| bad(e.to_string()))?)
    };
    Ok(Opening {
        store,
        writable,
        pinned,
        map,
    })
}

/// The pager's error for a file the file manager would not open.
fn map_open(e: OpenError) -> MapError {
    match e {
        OpenError::NoSuch(NoSuch {
            id: DataspaceId::Path(p),
            ..
        }) => MapError::MissingFile(p),
        OpenError::NotAFile(p) => MapError::NotAFile(p),
        OpenError::Empty(p) => MapError::EmptyFile(p),
        OpenError::Short {
            id: DataspaceId::Path(path),
            actual,
            expected,
        } => MapError::ShortFile {
            path,
            actual,
            expected,
        },
        OpenError::ReadOnly(p) => MapError::ReadOnly(p),
        OpenError::Io { path, source } => MapError::Open { path, source },
        e => MapError::Dataspace(e),
    }
}
