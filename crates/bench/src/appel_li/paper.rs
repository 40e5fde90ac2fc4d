//! SawMill's Table 1 (Gefflaut et al., "Building efficient and robust
//! multiserver systems: the SawMill approach", §5): the Appel-Li virtual
//! memory primitives in microseconds on OSF/1, Mach, SPIN and SawMill (L4),
//! printed beside our measurements for reference. Their machines (1990s
//! Alphas and Pentiums) are not ours: compare the ratios within a column.

use serde::Serialize;

/// One row of the paper's table, µs.
#[derive(Clone, Copy, Serialize)]
pub struct PaperRow {
    /// DEC OSF/1.
    pub osf1: f64,
    /// Mach.
    pub mach: f64,
    /// SPIN.
    pub spin: f64,
    /// SawMill (L4).
    pub sawmill: f64,
}

const fn row(osf1: f64, mach: f64, spin: f64, sawmill: f64) -> PaperRow {
    PaperRow {
        osf1,
        mach,
        spin,
        sawmill,
    }
}

/// The paper's row for primitive `name` (our names: `prot1` is the paper's `Prot`).
pub fn paper(name: &str) -> Option<PaperRow> {
    Some(match name {
        "prot1" => row(45.0, 106.0, 16.0, 22.0),
        "trap" => row(260.0, 185.0, 7.0, 22.0),
        "fault" => row(329.0, 415.0, 29.0, 22.0),
        "prot100" => row(1041.0, 1792.0, 213.0, 51.0),
        "unprot100" => row(1016.0, 302.0, 214.0, 25.0),
        "appel1" => row(382.0, 819.0, 39.0, 22.0),
        "appel2" => row(351.0, 608.0, 29.0, 25.0),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_every_primitive_has_the_papers_row() {
        for p in super::super::prims::Primitive::ALL {
            assert!(paper(p.name()).is_some(), "{}", p.name());
        }
        assert_eq!(paper("prot100").unwrap().sawmill, 51.0);
        assert!(paper("unprot1").is_none());
    }
}
