//! A page as a compressed tier holds it: nothing for a zero page, lz4
//! block-compressed, or raw where it does not compress below a page.

use std::sync::Arc;

use crate::sys::PAGE;

/// A page's contents in the tier.
#[derive(Clone)]
pub(crate) enum Data {
    /// All zero: nothing stored.
    Zero,
    /// lz4 block-compressed.
    Lz4(Arc<[u8]>),
    /// Stored as is (it did not compress below a page).
    Raw(Arc<[u8]>),
}

impl Data {
    /// The bytes it holds.
    pub fn bytes(&self) -> usize {
        match self {
            Data::Zero => 0,
            Data::Lz4(b) | Data::Raw(b) => b.len(),
        }
    }

    /// The tier's form of `page` (one page of bytes).
    pub fn of(page: &[u8]) -> Data {
        if is_zero(page) {
            return Data::Zero;
        }
        let packed = lz4_flex::block::compress(page);
        if packed.len() < PAGE {
            Data::Lz4(packed.into())
        } else {
            Data::Raw(page.into())
        }
    }
}

/// Whether `page` is all zero bytes (the compiler vectorizes the loop).
fn is_zero(page: &[u8]) -> bool {
    page.iter().all(|&b| b == 0)
}
