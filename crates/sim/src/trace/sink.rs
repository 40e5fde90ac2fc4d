//! Where readers put references: an in-memory [`super::Trace`] or a
//! streaming writer.

/// Receives page references one at a time.
pub trait TraceSink {
    /// One reference to page `vpn`; `write` if it stored to the page.
    fn reference(&mut self, vpn: u64, write: bool) -> std::io::Result<()>;
}

/// Passes references on, optionally merging a reference to the same page as
/// the one just before it into that one (write flags OR-ed).
pub struct Collapse<S> {
    inner: S,
    enabled: bool,
    pending: Option<(u64, bool)>,
}

impl<S: TraceSink> Collapse<S> {
    /// Wraps `inner`; merges repeats only if `enabled`.
    pub fn new(inner: S, enabled: bool) -> Self {
        Collapse {
            inner,
            enabled,
            pending: None,
        }
    }

    /// One reference.
    #[inline]
    pub fn reference(&mut self, vpn: u64, write: bool) -> std::io::Result<()> {
        if !self.enabled {
            return self.inner.reference(vpn, write);
        }
        match &mut self.pending {
            Some((v, w)) if *v == vpn => {
                *w |= write;
                Ok(())
            }
            pending => match pending.replace((vpn, write)) {
                Some((v, w)) => self.inner.reference(v, w),
                None => Ok(()),
            },
        }
    }

    /// Flushes a held reference and returns the inner sink.
    pub fn finish(mut self) -> std::io::Result<S> {
        if let Some((v, w)) = self.pending.take() {
            self.inner.reference(v, w)?;
        }
        Ok(self.inner)
    }
}

/// Builds a [`super::Trace`] from references in batches, looking a few
/// references ahead to prefetch their page-index entries: on traces with
/// many pages each new lookup is a cache miss, and overlapping them is most
/// of the speed of loading.
pub(crate) struct Batched {
    trace: super::Trace,
    buf: Vec<(u64, bool)>,
}

const BATCH: usize = 1024;
const AHEAD: usize = 16;

impl Batched {
    /// Batches into `trace`.
    pub(crate) fn new(trace: super::Trace) -> Self {
        Batched {
            trace,
            buf: Vec::with_capacity(BATCH),
        }
    }

    fn flush(&mut self) {
        for i in 0..self.buf.len() {
            if let Some(&(ahead, _)) = self.buf.get(i + AHEAD) {
                self.trace.prefetch(ahead);
            }
            let (vpn, write) = self.buf[i];
            self.trace.push(vpn, write);
        }
        self.buf.clear();
    }

    /// The trace with every reference pushed.
    pub(crate) fn into_trace(mut self) -> super::Trace {
        self.flush();
        self.trace
    }
}

impl TraceSink for Batched {
    #[inline]
    fn reference(&mut self, vpn: u64, write: bool) -> std::io::Result<()> {
        self.buf.push((vpn, write));
        if self.buf.len() == BATCH {
            self.flush();
        }
        Ok(())
    }
}
