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
