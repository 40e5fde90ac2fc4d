//! A fast, per-trace seeded hash for page numbers.
//!
//! SipHash costs more than the rest of parsing a reference; page numbers
//! need only a good mix, and the random seed keeps crafted traces from
//! forcing collisions.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};

/// Builds [`VpnHasher`]s with one random seed.
#[derive(Clone, Debug)]
pub(crate) struct VpnHash {
    seed: u64,
}

impl Default for VpnHash {
    fn default() -> Self {
        VpnHash {
            seed: RandomState::new().hash_one(0x9e37_79b9_7f4a_7c15_u64) | 1,
        }
    }
}

impl BuildHasher for VpnHash {
    type Hasher = VpnHasher;
    fn build_hasher(&self) -> VpnHasher {
        VpnHasher {
            seed: self.seed,
            state: 0,
        }
    }
}

/// Folded multiply of the key with the seed.
pub(crate) struct VpnHasher {
    seed: u64,
    state: u64,
}

impl Hasher for VpnHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(word));
        }
    }

    #[inline]
    fn write_u64(&mut self, v: u64) {
        let x = u128::from(self.state ^ v ^ 0x243f_6a88_85a3_08d3) * u128::from(self.seed);
        self.state = (x as u64) ^ ((x >> 64) as u64);
    }

    #[inline]
    fn finish(&self) -> u64 {
        self.state
    }
}
