//! An open far dataspace: its pages read and written through the link, a
//! window of pages per request (`MGET`/`MSET` of one hash tag), or, in the
//! naive mode kept for comparison, one `GET`/`SET` per page.

use std::io;
use std::sync::Arc;

use pagepilot_dataspace::{ManagerKey, PageStore, PAGE};
use redis::{Pipeline, Value};

use crate::keys::{page_key, pieces, written_key};
use crate::link::{Link, ReplicaWait};
use crate::written::WrittenWindows;

/// How pages travel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Batching {
    /// The pages of one window in one request: one `MGET` (read) or
    /// `MSET` (write) per window; on a single server the windows of one
    /// call go in one pipeline, one round trip.
    Windows,
    /// One `GET` or `SET` per page, one round trip each (the naive manager,
    /// for comparison).
    PerPage,
}

/// A far dataspace opened by a [`crate::RedisManager`].
#[derive(Debug)]
pub struct RedisStore {
    pub(crate) link: Arc<Link>,
    pub(crate) owner: ManagerKey,
    pub(crate) name: String,
    pub(crate) len: u64,
    pub(crate) window: usize,
    pub(crate) writable: bool,
    pub(crate) batching: Batching,
    /// Replicas a write waits for, if any.
    pub(crate) wait: Option<ReplicaWait>,
    /// The windows ever written, read when it was opened (`None`: a
    /// dataspace that does not record them; every page is asked for).
    pub(crate) written: Option<WrittenWindows>,
    /// Held while open: the manager refuses to delete a dataspace with a
    /// live token.
    pub(crate) _alive: Arc<()>,
}

/// The commands of one request and the pages they cover.
struct Request {
    pipe: Pipeline,
    count: usize,
    first: usize,
    pages: usize,
}

impl RedisStore {
    /// The dataspace's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Pages per hash tag.
    pub fn window(&self) -> usize {
        self.window
    }

    /// Requests sent so far by the manager and all its stores.
    pub fn round_trips(&self) -> u64 {
        self.link.round_trips()
    }

    fn pages(&self) -> usize {
        (self.len as usize).div_ceil(PAGE)
    }

    fn key(&self, page: usize) -> String {
        page_key(&self.name, self.window, page)
    }

    /// What pages `first..first+pages` are, in errors.
    fn what(&self, op: &str, first: usize, pages: usize) -> String {
        if pages == 1 {
            format!(
                "{op} key {} (page {first} of far dataspace {:?})",
                self.key(first),
                self.name
            )
        } else {
            format!(
                "{op} keys {}..{} (pages {first}..{} of far dataspace {:?})",
                self.key(first),
                self.key(first + pages - 1),
                first + pages,
                self.name
            )
        }
    }

    /// The requests for pages `first..end`, each command made by `command`
    /// for a piece (first page, pages).
    fn requests(
        &self,
        first: usize,
        end: usize,
        mut command: impl FnMut(&mut Pipeline, usize, usize),
    ) -> Vec<Request> {
        let one = |f: usize, n: usize, pipe: Pipeline, count| Request {
            pipe,
            count,
            first: f,
            pages: n,
        };
        match self.batching {
            Batching::PerPage => (first..end)
                .map(|p| {
                    let mut pipe = redis::pipe();
                    command(&mut pipe, p, 1);
                    one(p, 1, pipe, 1)
                })
                .collect(),
            // A cluster's windows live on different nodes: one request each.
            Batching::Windows if self.link.is_cluster() => pieces(first, end, self.window)
                .map(|(f, n)| {
                    let mut pipe = redis::pipe();
                    command(&mut pipe, f, n);
                    one(f, n, pipe, 1)
                })
                .collect(),
            // One server: every window of the call in one pipeline.
            Batching::Windows => {
                let mut pipe = redis::pipe();
                let mut count = 0;
                for (f, n) in pieces(first, end, self.window) {
                    command(&mut pipe, f, n);
                    count += 1;
                }
                vec![one(first, end - first, pipe, count)]
            }
        }
    }

    /// Whether the window of page `page` may hold data.
    fn window_has_data(&self, page: usize) -> bool {
        self.written
            .as_ref()
            .is_none_or(|w| w.contains(page / self.window))
    }

    /// Records the windows of pages `first..end` not yet known to be
    /// written as written, in the cluster (one request, `WAIT`ed for as the
    /// pages are) before their pages are sent, then here.
    fn mark_written(&self, first: usize, end: usize) -> io::Result<()> {
        let Some(written) = &self.written else {
            return Ok(());
        };
        let windows = (first / self.window)..=((end - 1) / self.window);
        let new = written.unwritten(windows);
        if new.is_empty() {
            return Ok(());
        }
        let key = written_key(&self.name);
        let mut pipe = redis::pipe();
        for &w in &new {
            pipe.cmd("SETBIT").arg(&key).arg(w).arg(1);
        }
        self.link.request(&pipe, new.len(), self.wait, &|| {
            format!(
                "marking windows {}..={} of far dataspace {:?} written ({key})",
                new[0],
                new[new.len() - 1],
                self.name
            )
        })?;
        for w in new {
            written.insert(w);
        }
        Ok(())
    }

    fn bad_reply(&self, page: usize, what: String) -> io::Error {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "{}: key {} (page {page} of far dataspace {:?}): {what}",
                self.link.target(),
                self.key(page),
                self.name
            ),
        )
    }

    /// Copies the reply `v` for page `page` to `dst` (a nil reply: a page
    /// never written, zero).
    ///
    /// # Safety
    /// `dst` is valid for `PAGE` bytes of writes.
    unsafe fn fill(&self, page: usize, v: &Value, dst: *mut u8) -> io::Result<()> {
        match v {
            // SAFETY: the caller's guarantee.
            Value::Nil => unsafe { dst.write_bytes(0, PAGE) },
            Value::BulkString(b) if b.len() == PAGE => {
                // SAFETY: `b` holds PAGE bytes; `dst` is valid for as many
                // and is not `b`'s memory.
                unsafe { std::ptr::copy_nonoverlapping(b.as_ptr(), dst, PAGE) }
            }
            Value::BulkString(b) => {
                return Err(self.bad_reply(
                    page,
                    format!("a value of {} bytes, a page has {PAGE}", b.len()),
                ))
            }
            other => return Err(self.bad_reply(page, format!("not a page: {other:?}"))),
        }
        Ok(())
    }
}

impl PageStore for RedisStore {
    unsafe fn read(&self, first: usize, pages: usize, dst: *mut u8) -> io::Result<usize> {
        let end = (first + pages).min(self.pages());
        if first >= end {
            return Ok(0);
        }
        // Windows never written are zeros, asked of nobody.
        let mut asked: Vec<(usize, usize)> = Vec::new();
        for (f, n) in pieces(first, end, self.window) {
            if self.window_has_data(f) {
                match asked.last_mut() {
                    Some((_, until)) if *until == f => *until = f + n,
                    _ => asked.push((f, f + n)),
                }
            } else {
                // SAFETY: pages `f..f + n` lie in the caller's buffer.
                unsafe { dst.add((f - first) * PAGE).write_bytes(0, n * PAGE) };
            }
        }
        let requests = asked.iter().flat_map(|&(from, until)| {
            self.requests(from, until, |pipe, f, n| {
                if n == 1 && self.batching == Batching::PerPage {
                    pipe.cmd("GET").arg(self.key(f));
                } else {
                    let cmd = pipe.cmd("MGET");
                    for p in f..f + n {
                        cmd.arg(self.key(p));
                    }
                }
            })
        });
        for r in requests {
            let replies = self.link.request(&r.pipe, r.count, None, &|| {
                self.what("reading", r.first, r.pages)
            })?;
            // The replies in page order: one value per GET, an array per MGET.
            let mut page = r.first;
            for reply in &replies {
                let values: &[Value] = match reply {
                    Value::Array(items) => items,
                    single => std::slice::from_ref(single),
                };
                for v in values {
                    if page >= r.first + r.pages {
                        return Err(self.bad_reply(page, "more values than keys asked for".into()));
                    }
                    // SAFETY: `page - first < pages`: inside the caller's
                    // buffer, valid for writes of whole pages.
                    unsafe { self.fill(page, v, dst.add((page - first) * PAGE)) }?;
                    page += 1;
                }
            }
            if page != r.first + r.pages {
                return Err(self.bad_reply(page, "fewer values than keys asked for".into()));
            }
        }
        let tail = self.len as usize % PAGE;
        if end == self.pages() && tail != 0 {
            // SAFETY: the last page is in the caller's buffer; the bytes
            // beyond the dataspace's end read as zero.
            unsafe {
                dst.add((end - 1 - first) * PAGE + tail)
                    .write_bytes(0, PAGE - tail)
            };
        }
        Ok(end - first)
    }

    unsafe fn write(&self, first: usize, pages: usize, src: *const u8) -> io::Result<()> {
        if !self.writable {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!("far dataspace {:?} is open read-only", self.name),
            ));
        }
        let end = (first + pages).min(self.pages());
        if first >= end {
            return Ok(());
        }
        let tail = self.len as usize % PAGE;
        let last = self.pages() - 1;
        let page_bytes = |p: usize| -> std::borrow::Cow<'_, [u8]> {
            // SAFETY: `p - first < pages`: a whole page of the caller's buffer.
            let s = unsafe { std::slice::from_raw_parts(src.add((p - first) * PAGE), PAGE) };
            if p == last && tail != 0 {
                // Bytes beyond the dataspace's end are dropped.
                let mut v = s.to_vec();
                v[tail..].fill(0);
                v.into()
            } else {
                s.into()
            }
        };
        self.mark_written(first, end)?;
        let requests = self.requests(first, end, |pipe, f, n| {
            if n == 1 && self.batching == Batching::PerPage {
                pipe.cmd("SET").arg(self.key(f)).arg(&*page_bytes(f));
            } else {
                let cmd = pipe.cmd("MSET");
                for p in f..f + n {
                    cmd.arg(self.key(p)).arg(&*page_bytes(p));
                }
            }
        });
        for r in requests {
            self.link.request(&r.pipe, r.count, self.wait, &|| {
                self.what("writing", r.first, r.pages)
            })?;
        }
        Ok(())
    }

    fn sync(&self) -> io::Result<()> {
        // Every write is complete at the server when `write` returns.
        Ok(())
    }

    fn size(&self) -> u64 {
        self.len
    }

    fn direct(&self) -> bool {
        false
    }

    fn has_data(&self, page: usize) -> bool {
        self.window_has_data(page)
    }

    fn bookkeeping_bytes(&self) -> usize {
        self.written.as_ref().map_or(0, WrittenWindows::bytes)
    }

    fn persistent(&self) -> bool {
        true
    }

    fn into_any(self: Box<Self>) -> Box<dyn std::any::Any> {
        self
    }
}
