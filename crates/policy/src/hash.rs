//! A fast hasher for page numbers: the sequence table's end-point map, the
//! live pager's page-to-slot map.

use std::hash::{BuildHasherDefault, Hasher};

/// SplitMix64's finaliser over a `u64` key: page numbers of a scan are
/// consecutive, and this spreads them over every bit the table uses.
#[derive(Clone, Copy, Debug, Default)]
pub struct VpnHasher(u64);

impl Hasher for VpnHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(self.0.rotate_left(8) ^ u64::from(b));
        }
    }

    fn write_u32(&mut self, x: u32) {
        self.write_u64(u64::from(x));
    }

    fn write_u64(&mut self, x: u64) {
        let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        self.0 = z ^ (z >> 31);
    }
}

/// Builds [`VpnHasher`]s.
pub type BuildVpnHasher = BuildHasherDefault<VpnHasher>;
