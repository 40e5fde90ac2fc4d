//! The benchmark's synthetic trace: the paper's behaviours mixed, built
//! deterministically.

use pagepilot_sim::Trace;

/// A deterministic mix of the paper's behaviours over `pages` pages, each
/// page reference repeated 1-4 times as consecutive accesses to one page
/// are: loops over small regions, long sweeps up or down, and random
/// references mostly to a hot region.
pub fn synthetic(refs: u64, pages: u64) -> Trace {
    let mut rng = XorShift(0x9E37_79B9_7F4A_7C15);
    let total = refs as usize;
    let mut vpns = Vec::with_capacity(total);
    // Touch every page once so the footprint is exactly `pages`.
    vpns.extend(0..pages);
    let emit = |vpns: &mut Vec<u64>, rng: &mut XorShift, page: u64| {
        for _ in 0..1 + rng.below(4) {
            if vpns.len() < total {
                vpns.push(page % pages);
            }
        }
    };
    while vpns.len() < total {
        let start = rng.below(pages);
        match rng.below(4) {
            0 => {
                let len = pages / 4 + rng.below(pages * 3 / 4 + 1);
                let up = rng.below(2) == 0;
                for i in 0..len {
                    emit(&mut vpns, &mut rng, start + if up { i } else { len - i });
                }
            }
            1 | 2 => {
                let len = 1 + rng.below(pages / 8);
                for _ in 0..2 + rng.below(9) {
                    for i in 0..len {
                        emit(&mut vpns, &mut rng, start + i);
                    }
                }
            }
            _ => {
                let hot = 1 + pages / 16;
                for _ in 0..pages {
                    let page = if rng.below(10) == 0 {
                        rng.below(pages)
                    } else {
                        start + rng.below(hot)
                    };
                    emit(&mut vpns, &mut rng, page);
                }
            }
        }
    }
    Trace::from_pages(vpns)
}

/// xorshift64*: enough randomness for a benchmark trace, and reproducible.
struct XorShift(u64);

impl XorShift {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let r = self.0.wrapping_mul(0x2545_F491_4F6C_DD1D);
        if n == 0 {
            0
        } else {
            r % n
        }
    }
}
