//! What routing a fault through a region's attachments costs: one page
//! read from a store directly, and through `Routed` with 2 and 16
//! attachments (the store copies one page from memory, so the difference
//! is the routing). `cargo bench -p pagepilot-dataspace --bench routing`.

// criterion_group! generates undocumented items.
#![allow(missing_docs)]

use std::io;

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use pagepilot_dataspace::{Attached, PageStore, Routed, PAGE};

/// Pages in memory.
struct Memory(Vec<u8>);

impl PageStore for Memory {
    unsafe fn read(&self, first: usize, pages: usize, dst: *mut u8) -> io::Result<usize> {
        // SAFETY: the benchmark reads inside the store into a buffer of `pages` pages.
        unsafe {
            std::ptr::copy_nonoverlapping(self.0.as_ptr().add(first * PAGE), dst, pages * PAGE)
        };
        Ok(pages)
    }
    unsafe fn write(&self, _: usize, _: usize, _: *const u8) -> io::Result<()> {
        Ok(())
    }
    fn sync(&self) -> io::Result<()> {
        Ok(())
    }
    fn size(&self) -> u64 {
        self.0.len() as u64
    }
    fn direct(&self) -> bool {
        false
    }
    fn persistent(&self) -> bool {
        false
    }
    fn into_any(self: Box<Self>) -> Box<dyn std::any::Any> {
        self
    }
}

#[repr(C, align(4096))]
struct Page([u8; PAGE]);

fn routed(parts: usize, pages_each: usize) -> Routed {
    Routed::new(
        (0..parts)
            .map(|i| Attached {
                at: i * pages_each,
                pages: pages_each,
                offset: 0,
                store: Box::new(Memory(vec![i as u8; pages_each * PAGE])),
            })
            .collect(),
    )
    .unwrap()
}

fn bench(c: &mut Criterion) {
    let mut page = Box::new(Page([0; PAGE]));
    let direct: Box<dyn PageStore> = Box::new(Memory(vec![1; 256 * PAGE]));
    let two: Box<dyn PageStore> = Box::new(routed(2, 128));
    let sixteen: Box<dyn PageStore> = Box::new(routed(16, 16));
    let mut g = c.benchmark_group("one page read");
    for (name, store) in [
        ("direct", &direct),
        ("routed, 2 attachments", &two),
        ("routed, 16 attachments", &sixteen),
    ] {
        let mut p = 0;
        g.bench_function(name, |b| {
            b.iter(|| {
                p = (p + 97) % 256;
                // SAFETY: `page` is one aligned page, owned here.
                black_box(unsafe { store.read(black_box(p), 1, page.0.as_mut_ptr()) }.unwrap())
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
