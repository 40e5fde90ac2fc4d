//! How a region reads ahead and serves its faults: the options the
//! pager settles at map time.

/// Read-ahead tuning.
#[derive(Clone, Copy, Debug)]
pub struct Tuning {
    /// Pages read per fault outside a sequence (0: sized by use, `around`).
    pub fault_around: usize,
    /// Largest read-ahead window along a sequence of faults, pages.
    pub readahead_max: usize,
    /// Largest cluster of zero-filled pages along a stream of first touches.
    pub zero_around_max: usize,
    /// Whether sequential faults start asynchronous read-ahead of the next window.
    pub async_readahead: bool,
    /// Prefetched windows kept ahead of the application (reads in flight).
    pub readahead_depth: usize,
    /// Who reads a missing fault's pages: the handler that took the fault,
    /// or a reader thread (the handler going on with the next fault).
    pub fault_reads: FaultReads,
    /// How long a handler keeps polling after a fault before it sleeps, us.
    pub spin_us: u64,
    /// Windows into free frames whose pages the page cache holds are
    /// copied in and mapped by the thread that issues them
    /// (`fault::copy_in`); off where that thread may be in a signal
    /// handler (the faulting thread's service), which must not allocate.
    pub copy_windows: bool,
    /// A policy program: the pool's normal reclamation runs only its
    /// ReclaimFrame event (HiPEC); a built-in's victim choice is its own.
    pub reclaim_event_only: bool,
}

/// Who reads a missing fault's pages in handler-thread service.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultReads {
    /// The handler that took the fault (the faulting thread in its own
    /// service).
    Handler,
    /// Always a reader thread (`RegionOptions::reader_threads`).
    Readers,
    /// A reader thread when other faults wait in the same batch of events
    /// (several application threads faulting at once: their reads go in
    /// flight together, as each thread's own would under the kernel); the
    /// handler itself otherwise, so a lone thread pays no extra hand-off.
    ReadersWhenQueued,
}
