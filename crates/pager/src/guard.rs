//! A policy that panics must not take the region down: its faults would
//! never be served. The guard catches the panic, records it as an incident
//! and retires the policy; from then on the engine's own fallback (a
//! rotating hand over resident pages) chooses victims, as HiPEC falls back
//! when a policy program misbehaves.

use std::panic::{catch_unwind, AssertUnwindSafe};

use pagepilot_policy::{Fault, Memory, Page, Policy};

/// A policy behind a panic guard.
pub struct Guarded {
    inner: Box<dyn Policy>,
    name: String,
    failed: Option<String>,
}

impl Guarded {
    /// Guards `inner`.
    pub fn new(inner: Box<dyn Policy>) -> Self {
        let name = inner.name();
        Guarded {
            inner,
            name,
            failed: None,
        }
    }

    fn call<T>(&mut self, what: &str, default: T, f: impl FnOnce(&mut dyn Policy) -> T) -> T {
        if self.failed.is_some() {
            return default;
        }
        let inner = &mut self.inner;
        match catch_unwind(AssertUnwindSafe(|| f(inner.as_mut()))) {
            Ok(v) => v,
            Err(e) => {
                let msg = e
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| e.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "unknown panic".into());
                self.failed = Some(format!(
                    "policy `{}` panicked in {what} ({msg}); the engine's fallback replaces it",
                    self.name
                ));
                default
            }
        }
    }
}

impl Policy for Guarded {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn on_fault(&mut self, fault: Fault, mem: &mut dyn Memory) {
        self.call("on_fault", (), |p| p.on_fault(fault, mem));
    }

    fn victim(&mut self, incoming: Page, mem: &mut dyn Memory) -> Option<Page> {
        self.call("victim", None, |p| p.victim(incoming, mem))
    }

    fn on_evict(&mut self, page: Page, mem: &mut dyn Memory) {
        self.call("on_evict", (), |p| p.on_evict(page, mem));
    }

    fn on_forget(&mut self, page: Page) {
        self.call("on_forget", (), |p| p.on_forget(page));
    }

    fn reclaim(&mut self, count: usize, mem: &mut dyn Memory) -> Vec<Page> {
        self.call("reclaim", Vec::new(), |p| p.reclaim(count, mem))
    }

    fn incidents(&self) -> Vec<String> {
        let mut v = if self.failed.is_none() {
            self.inner.incidents()
        } else {
            Vec::new()
        };
        v.extend(self.failed.clone());
        v
    }
}
