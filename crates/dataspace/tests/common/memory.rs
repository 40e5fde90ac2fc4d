//! `Memory`: a page store in a vector, for tests of what routes pages.

use std::io;
use std::sync::{Arc, Mutex};

use pagepilot_dataspace::{PageStore, PAGE};

/// Pages in memory; the bytes can be reached through a clone of the `Arc`.
pub struct Memory(pub Arc<Mutex<Vec<u8>>>);

impl Memory {
    /// `pages` pages, page `i` filled with `fill(i)`.
    pub fn new(pages: usize, fill: impl Fn(usize) -> u8) -> Self {
        Memory(Arc::new(Mutex::new(
            (0..pages * PAGE).map(|b| fill(b / PAGE)).collect(),
        )))
    }
}

impl PageStore for Memory {
    unsafe fn read(&self, first: usize, pages: usize, dst: *mut u8) -> io::Result<usize> {
        let data = self.0.lock().unwrap();
        let have = (data.len() / PAGE).saturating_sub(first).min(pages);
        // SAFETY: the caller lends `pages` pages at `dst`; `have` of them
        // are copied from inside `data`.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr().add(first * PAGE), dst, have * PAGE) };
        Ok(have)
    }
    unsafe fn write(&self, first: usize, pages: usize, src: *const u8) -> io::Result<()> {
        let mut data = self.0.lock().unwrap();
        let n = (data.len() / PAGE).saturating_sub(first).min(pages);
        // SAFETY: the caller lends `pages` pages at `src`; `n` of them go
        // inside `data`.
        unsafe {
            std::ptr::copy_nonoverlapping(src, data.as_mut_ptr().add(first * PAGE), n * PAGE)
        };
        Ok(())
    }
    fn sync(&self) -> io::Result<()> {
        Ok(())
    }
    fn size(&self) -> u64 {
        self.0.lock().unwrap().len() as u64
    }
    fn direct(&self) -> bool {
        false
    }
    fn persistent(&self) -> bool {
        true
    }
    fn into_any(self: Box<Self>) -> Box<dyn std::any::Any> {
        self
    }
}
