//! Reference arrays on huge pages. A trace's reference array runs to
//! hundreds of MiB; faulted in 4 KiB at a time it costs tens of thousands
//! of page faults, more than reading the file (measured in
//! `docs/bench-sim.md`). Asking for transparent huge pages cuts that to
//! one fault per 2 MiB.

/// Below this, huge pages are not worth asking for.
const HUGE: usize = 2 << 20;

/// An empty vector with room for `capacity` elements, its allocation
/// advised to be backed by huge pages where the system allows it.
pub(crate) fn vec_with_capacity<T>(capacity: usize) -> Vec<T> {
    let v: Vec<T> = Vec::with_capacity(capacity);
    let bytes = v.capacity() * std::mem::size_of::<T>();
    if bytes >= HUGE {
        let start = (v.as_ptr() as usize).next_multiple_of(4096);
        let end = (v.as_ptr() as usize + bytes) & !4095;
        if end > start {
            // SAFETY: the range lies inside the vector's own allocation,
            // which nothing else maps; MADV_HUGEPAGE changes no contents and
            // only guides how the kernel backs the pages. Failure (huge
            // pages off) leaves ordinary pages, so the result is ignored.
            unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE) };
        }
    }
    v
}
