//! Fault-path measurements behind `docs/pager.md`, side by side with the
//! kernel's own faults on the same kind of memory, in one run:
//! `cargo bench -p pagepilot-pager --bench paths [-- quick] [faults|wp|random|scaling|scan]`.
//! Prints one JSON object per line.

use std::io::Write;
use std::time::Instant;

use pagepilot_pager::{Backing, FaultService, Region, RegionOptions, PAGE_SIZE};

const P: usize = PAGE_SIZE;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

/// Touches one byte per page of `[base, base+len)`, from `threads` threads
/// each taking an interleaved share of pages; returns ns per page.
fn touch_pages(base: usize, len: usize, threads: usize, write: bool) -> f64 {
    let pages = len / P;
    let t0 = Instant::now();
    std::thread::scope(|s| {
        for t in 0..threads {
            s.spawn(move || {
                let mut sum = 0u64;
                for p in (t..pages).step_by(threads) {
                    let a = (base + p * P) as *mut u8;
                    // SAFETY: inside a live mapping of `len` bytes.
                    unsafe {
                        if write {
                            a.write_volatile(1);
                        } else {
                            sum += a.read_volatile() as u64;
                        }
                    }
                }
                std::hint::black_box(sum);
            });
        }
    });
    t0.elapsed().as_nanos() as f64 / pages as f64
}

/// Touches one byte per page, timing each access; returns the median ns.
/// Medians keep preemptions on a loaded machine out of the result.
fn touch_median(base: usize, len: usize, write: bool) -> f64 {
    let mut t = Vec::with_capacity(len / P);
    for p in 0..len / P {
        let a = (base + p * P) as *mut u8;
        let t0 = Instant::now();
        // SAFETY: inside a live mapping of `len` bytes.
        unsafe {
            if write {
                a.write_volatile(1);
            } else {
                std::hint::black_box(a.read_volatile());
            }
        }
        t.push(t0.elapsed().as_nanos() as f64);
    }
    median(t)
}

/// A kernel shmem mapping (memfd) of `len` bytes, the kernel's own fault path.
fn kernel_shmem(len: usize) -> (usize, i32) {
    // SAFETY: plain memfd + mmap; the mapping is unmapped by `unmap_kernel`.
    unsafe {
        let fd = libc::memfd_create(c"bench".as_ptr(), 0);
        assert!(fd >= 0);
        assert_eq!(libc::ftruncate(fd, len as i64), 0);
        let p = libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            fd,
            0,
        );
        assert_ne!(p, libc::MAP_FAILED);
        (p as usize, fd)
    }
}

fn unmap_kernel(addr: usize, len: usize, fd: i32) {
    // SAFETY: the mapping and fd come from `kernel_shmem`.
    unsafe {
        libc::munmap(addr as *mut _, len);
        libc::close(fd);
    }
}

fn zap(addr: usize, len: usize) {
    // SAFETY: drops PTEs of a shared mapping; the pages stay in the memfd.
    unsafe { libc::madvise(addr as *mut _, len, libc::MADV_DONTNEED) };
}

fn emit(v: serde_json::Value) {
    println!("{v}");
    std::io::stdout().flush().unwrap();
}

/// Missing (first touch, zero-filled) and minor faults: pagepilot vs kernel,
/// median over faults of the median over runs.
fn fault_cost(len: usize, runs: usize, service: FaultService, handlers: usize, spin_us: u64) {
    let (mut pp_miss, mut k_miss, mut pp_minor, mut k_minor) = (vec![], vec![], vec![], vec![]);
    let mut lat = None;
    for _ in 0..runs {
        let (k, fd) = kernel_shmem(len);
        k_miss.push(touch_median(k, len, true));
        zap(k, len);
        k_minor.push(touch_median(k, len, false));
        unmap_kernel(k, len, fd);

        let r = Region::map(
            // One fault per page (no zero clusters): the per-fault cost.
            RegionOptions::new(Backing::Anonymous { len }, len, "fifo")
                .with_zero_around(1)
                .with_fault_service(service)
                .with_handler_threads(handlers)
                .with_handler_spin(spin_us),
        )
        .unwrap();
        pp_miss.push(touch_median(r.as_ptr() as usize, len, true));
        lat = Some(r.stats().latency);
        zap(r.as_ptr() as usize, len);
        pp_minor.push(touch_median(r.as_ptr() as usize, len, false));
        r.unmap().unwrap();
    }
    let (a, b, c, d) = (
        median(pp_miss),
        median(k_miss),
        median(pp_minor),
        median(k_minor),
    );
    emit(serde_json::json!({
        "bench": "fault_cost", "pages": len / P, "service": format!("{service:?}"), "handlers": handlers, "spin_us": spin_us,
        "missing_ns": a, "kernel_missing_ns": b, "missing_ratio": a / b,
        "minor_ns": c, "kernel_minor_ns": d, "minor_ratio": c / d,
        "service_latency_missing": lat,
    }));
}

/// Random page reads over a file four times the budget: `threads`
/// application threads, served by `handlers` handler threads (0: in the
/// faulting thread). Every read is a page-in from the device (O_DIRECT).
fn random_reads(file_pages: usize, runs: usize) {
    let dir = std::env::temp_dir().join(format!("pagepilot-bench-r{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("random");
    std::fs::write(&path, vec![7u8; file_pages * P]).unwrap();
    let len = file_pages * P;
    // (handler threads (0: the faulting thread), application threads, reader threads)
    for (handlers, threads, readers) in [
        (1, 1, 0),
        (1, 1, 4),
        (1, 4, 0),
        (1, 4, 4),
        (2, 4, 0),
        (4, 4, 0),
        (0, 1, 0),
        (0, 4, 0),
    ] {
        let mut v = vec![];
        for _ in 0..runs {
            let opts = RegionOptions::new(
                Backing::File {
                    path: path.clone(),
                    writable: false,
                },
                len / 4,
                "clock",
            );
            let opts = if handlers == 0 {
                opts.with_fault_service(FaultService::FaultingThread)
            } else {
                opts.with_handler_threads(handlers)
            };
            let r = Region::map(opts.with_reader_threads(readers)).unwrap();
            let base = r.as_ptr() as usize;
            let per = 2000 / threads;
            let t0 = Instant::now();
            std::thread::scope(|s| {
                for t in 0..threads {
                    s.spawn(move || {
                        let mut x = 0x9E37_79B9u64 ^ (t as u64 * 0x1234_5678);
                        let mut sum = 0u64;
                        for _ in 0..per {
                            x ^= x << 13;
                            x ^= x >> 7;
                            x ^= x << 17;
                            let p = (x % file_pages as u64) as usize;
                            // SAFETY: inside the region.
                            sum += unsafe { ((base + p * P) as *const u8).read_volatile() } as u64;
                        }
                        std::hint::black_box(sum);
                    });
                }
            });
            v.push((per * threads) as f64 / t0.elapsed().as_secs_f64());
            r.unmap().unwrap();
        }
        emit(serde_json::json!({
            "bench": "random_reads", "handlers": handlers, "threads": threads, "readers": readers,
            "pages_per_s": median(v),
        }));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Write-protect faults (dirty tracking): the first write to a page that was
/// read, pagepilot vs the kernel's own first write to a read-mapped shmem page.
fn wp_cost(len: usize, runs: usize) {
    let (mut pp, mut k) = (vec![], vec![]);
    for _ in 0..runs {
        let (a, fd) = kernel_shmem(len);
        touch_median(a, len, false);
        k.push(touch_median(a, len, true));
        unmap_kernel(a, len, fd);
        let r = Region::map_anon(len, len, "fifo").unwrap();
        touch_median(r.as_ptr() as usize, len, false);
        pp.push(touch_median(r.as_ptr() as usize, len, true));
        r.unmap().unwrap();
    }
    let (a, b) = (median(pp), median(k));
    emit(serde_json::json!({
        "bench": "wp_cost", "first_write_ns": a, "kernel_first_write_ns": b, "ratio": a / b,
    }));
}

/// Missing faults from `threads` application threads with `handlers` handler threads.
fn scaling(len: usize, runs: usize) {
    for handlers in [0, 1, 2, 4] {
        for threads in [1, 2, 4] {
            let mut v = vec![];
            let mut k = vec![];
            for _ in 0..runs {
                // Faults per second: one fault per page (no zero clusters).
                let opts =
                    RegionOptions::new(Backing::Anonymous { len }, len, "fifo").with_zero_around(1);
                // 0 handler threads: faults served in the faulting thread.
                let opts = if handlers == 0 {
                    opts.with_fault_service(FaultService::FaultingThread)
                } else {
                    opts.with_handler_threads(handlers)
                };
                let r = Region::map(opts).unwrap();
                v.push(touch_pages(r.as_ptr() as usize, len, threads, true));
                r.unmap().unwrap();
                let (a, fd) = kernel_shmem(len);
                k.push(touch_pages(a, len, threads, true));
                unmap_kernel(a, len, fd);
            }
            let (ns, kns) = (median(v), median(k));
            emit(serde_json::json!({
                "bench": "scaling", "handlers": handlers, "threads": threads,
                "faults_per_s": 1e9 / ns, "kernel_faults_per_s": 1e9 / kns,
                "ratio_to_kernel": kns / ns,
            }));
        }
    }
}

/// Sequential scans of a file under a budget of a quarter of it, per read-ahead size,
/// against the kernel's buffered mmap of the same file (page cache dropped first).
fn scan(file_pages: usize, runs: usize) {
    let dir = std::env::temp_dir().join(format!("pagepilot-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("scan");
    let data: Vec<u8> = (0..file_pages * P).map(|i| (i * 7 % 251) as u8).collect();
    std::fs::write(&path, &data).unwrap();
    let len = file_pages * P;
    let drop_cache = || {
        let f = std::fs::File::open(&path).unwrap();
        use std::os::fd::AsRawFd;
        // SAFETY: fadvise on an open descriptor.
        unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    };
    let configs: Vec<(usize, bool, usize)> = match std::env::var("PAGEPILOT_SCAN") {
        // "ra:async:depth,..." picks configurations (for profiling one).
        Ok(list) => list
            .split(',')
            .map(|c| {
                let f: Vec<usize> = c.split(':').map(|x| x.parse().unwrap()).collect();
                (f[0], f[1] != 0, f[2])
            })
            .collect(),
        Err(_) => vec![
            (1, false, 1),
            (16, false, 1),
            (64, false, 1),
            (256, false, 1),
            (16, true, 4),
            (64, true, 1),
            (64, true, 4),
            (64, true, 7),
            (128, true, 3),
        ],
    };
    for (ra, async_ra, depth) in configs {
        let (mut v, mut k) = (vec![], vec![]);
        let mut stats = serde_json::Value::Null;
        for _ in 0..runs {
            let opts = RegionOptions::new(
                Backing::File {
                    path: path.clone(),
                    writable: false,
                },
                len / 4,
                "lru",
            )
            .with_readahead(ra)
            .with_async_readahead(async_ra)
            .with_readahead_depth(depth);
            let r = Region::map(opts).unwrap();
            v.push(touch_pages(r.as_ptr() as usize, len, 1, false));
            stats = serde_json::from_str(&r.stats_json()).unwrap();
            r.unmap().unwrap();
            drop_cache();
            let f = std::fs::File::open(&path).unwrap();
            use std::os::fd::AsRawFd;
            // SAFETY: a private read-only mapping of the file, unmapped below.
            let m = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    len,
                    libc::PROT_READ,
                    libc::MAP_SHARED,
                    f.as_raw_fd(),
                    0,
                )
            };
            k.push(touch_pages(m as usize, len, 1, false));
            // SAFETY: unmapping what was mapped above.
            unsafe { libc::munmap(m, len) };
            drop_cache();
        }
        let (ns, kns) = (median(v), median(k));
        emit(serde_json::json!({
            "bench": "seq_scan_cold", "readahead_pages": ra, "async_readahead": async_ra, "depth": depth, "file_pages": file_pages,
            "us_per_page": ns / 1e3, "kernel_us_per_page": kns / 1e3,
            "mb_per_s": P as f64 / ns * 1e3, "kernel_mb_per_s": P as f64 / kns * 1e3,
            "ratio_to_kernel": kns / ns,
            "faults": stats["fault_events"], "page_ins": stats["missing_faults"],
            "minor_faults": stats["minor_faults"], "retried": stats["retried_faults"],
        }));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

fn main() {
    let quick = std::env::args().any(|a| a == "quick");
    let runs = if quick { 3 } else { 5 };
    let only: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| ["faults", "scaling", "scan", "random", "wp"].contains(&a.as_str()))
        .collect();
    let want = |name: &str| only.is_empty() || only.iter().any(|o| o == name);
    let size = if quick { 4096 } else { 16384 };
    if want("faults") {
        for (service, handlers, spin_us) in [
            (FaultService::HandlerThreads, 1, 0),
            (FaultService::HandlerThreads, 1, 50),
            (FaultService::HandlerThreads, 2, 0),
            (FaultService::FaultingThread, 1, 0),
        ] {
            fault_cost(size * P, runs, service, handlers, spin_us);
        }
    }
    if want("wp") {
        wp_cost(size * P, runs);
    }
    if want("random") {
        random_reads(size, runs);
    }
    if want("scaling") {
        scaling(size * P, runs);
    }
    if want("scan") {
        scan(size, runs);
    }
}
