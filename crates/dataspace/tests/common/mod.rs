//! Helpers shared by the manager tests: page-aligned buffers and files.

#![allow(dead_code)]

use pagepilot_dataspace::{PageStore, PAGE};

/// One page, page aligned (O_DIRECT wants it).
#[derive(Clone)]
#[repr(C, align(4096))]
pub struct Page(pub [u8; PAGE]);

/// `n` zero pages.
pub fn pages(n: usize) -> Vec<Page> {
    vec![Page([0; PAGE]); n]
}

/// Reads pages `first..first+n` of `store`; returns how many exist and the bytes.
pub fn read(store: &dyn PageStore, first: usize, n: usize) -> (usize, Vec<u8>) {
    let mut buf = pages(n);
    // SAFETY: `buf` is n aligned pages, owned here.
    let got = unsafe { store.read(first, n, buf.as_mut_ptr().cast()) }.unwrap();
    (got, buf.iter().flat_map(|p| p.0).collect())
}

/// Writes `n` pages filled with `byte` as pages `first..first+n` of `store`.
pub fn write(store: &dyn PageStore, first: usize, n: usize, byte: u8) {
    let buf = vec![Page([byte; PAGE]); n];
    // SAFETY: `buf` is n aligned pages.
    unsafe { store.write(first, n, buf.as_ptr().cast()) }.unwrap();
}

/// A file at `path` of `pages` pages, page `i` filled with byte `i + 1`.
pub fn numbered_file(path: &std::path::Path, pages: usize) {
    let bytes: Vec<u8> = (0..pages).flat_map(|i| [i as u8 + 1; PAGE]).collect();
    std::fs::write(path, bytes).unwrap();
}

mod layer;
#[allow(unused_imports)]
pub use layer::Layer;

mod memory;
#[allow(unused_imports)]
pub use memory::Memory;
