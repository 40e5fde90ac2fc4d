//! Reads issued to a reader thread or the ring: what they read and why.

/// Who asked for pages to be read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cause {
    /// A missing fault on one of the pages.
    Fault {
        /// The faulting page.
        page: u32,
        /// The fault was a write.
        write: bool,
        /// A page of the cluster is left unmapped as a probe of its use
        /// (`around`).
        probe: bool,
    },
    /// Asynchronous read-ahead with its ticket (the order in which it is
    /// accounted): the first page is left unmapped as the marker whose
    /// first touch asks for the next window.
    Prefetch(u64),
    /// A piece of a missing fault's read-around cluster read beside the
    /// faulting page's piece (`fault::load`): handed to the policy and
    /// mapped like the fault's own cluster, with no faulting page.
    Around {
        /// The piece's last page stays unmapped as the cluster's probe.
        probe: bool,
    },
}

impl Cause {
    /// A prefetched window's ticket.
    pub fn ticket(self) -> Option<u64> {
        match self {
            Cause::Prefetch(t) => Some(t),
            Cause::Fault { .. } | Cause::Around { .. } => None,
        }
    }
}

/// Pages for a reader thread to read: a prefetched window, or a missing
/// fault's cluster. The pages are `Loading` and the victims making room for
/// them were chosen when the job was issued.
pub struct ReadJob {
    /// First page.
    pub first: u32,
    /// Pages.
    pub pages: usize,
    /// Why they are read.
    pub cause: Cause,
    /// Victims chosen for it (`Evicting`), and whether each is dirty.
    pub victims: Vec<(u32, bool)>,
}
