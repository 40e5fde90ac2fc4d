//! The process's region map (SawMill): every mapped region's address
//! ranges and the dataspace attached at each, with the offset into it. The
//! fault path routes by it: a fault's address finds its region (each
//! region its own userfaultfd, or the faulting-thread service's table), and
//! the region's page store the dataspace attached at that page
//! (`pagepilot_dataspace::Routed`).

use std::sync::Weak;

pub use crate::backing::Mapped;

/// Every live region's attached dataspaces, by address (a region mapped in
/// a child after `fork` is the parent's and is left out).
pub fn region_map() -> Vec<Mapped> {
    let mut map: Vec<Mapped> = crate::lifecycle::regions()
        .iter()
        .filter_map(Weak::upgrade)
        .filter(|sh| !sh.forked())
        .flat_map(|sh| {
            let (app, len) = (sh.views().app(), sh.views().map_len());
            sh.attached()
                .iter()
                .map(|m| Mapped {
                    start: app + m.start,
                    end: app + m.end.min(len),
                    ..m.clone()
                })
                .collect::<Vec<_>>()
        })
        .collect();
    map.sort_by_key(|m| m.start);
    map
}
