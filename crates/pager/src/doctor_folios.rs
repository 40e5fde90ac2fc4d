//! `pagepilot doctor`'s check of shmem's large folios: whether a region's
//! frames (memfd pages) come in folios larger than 4 KiB, and what that
//! would give or cost. `benches/fill_ways.c`, with 64 KiB shmem folios
//! turned on (2026-11-28): 32-page windows read into fresh frames 1.6x
//! faster (853k against 531k pages per second; 2 MiB folios 909k). But a
//! fault alone is then charged a whole folio, and an eviction punches 4 KiB
//! out of it, so the memory a region takes can pass its budget: the pager
//! counts 4 KiB frames. So they are not asked for, and doctor says which
//! are on.

use super::{check, Check, State};

const SYSFS: &str = "/sys/kernel/mm/transparent_hugepage";

/// The option selected in a sysfs choice (`always [never] deny`).
fn selected(choice: &str) -> Option<&str> {
    let start = choice.find('[')? + 1;
    let end = start + choice[start..].find(']')?;
    Some(&choice[start..end])
}

/// The folio sizes shmem allocates without being asked (`madvise`), from
/// the top-level `shmem_enabled` and each `hugepages-<size>/shmem_enabled`
/// (`inherit`: the top level's), as (size, setting).
pub(super) fn enabled_sizes<'a>(
    top: &str,
    sizes: &'a [(String, String)],
) -> Vec<(&'a str, String)> {
    let top = selected(top).unwrap_or("never");
    sizes
        .iter()
        .filter_map(|(size, choice)| {
            let own = selected(choice).unwrap_or("never");
            let effective = if own == "inherit" { top } else { own };
            matches!(effective, "always" | "within_size" | "force")
                .then(|| (size.as_str(), effective.to_string()))
        })
        .collect()
}

/// The check.
pub(super) fn folios_check() -> Check {
    let name = "shmem large folios";
    let Ok(top) = std::fs::read_to_string(format!("{SYSFS}/shmem_enabled")) else {
        return check(
            name,
            State::Ok,
            "none (no transparent huge pages)".into(),
            None,
        );
    };
    let mut sizes: Vec<(String, String)> = std::fs::read_dir(SYSFS)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let dir = e.file_name().to_string_lossy().into_owned();
            let size = dir.strip_prefix("hugepages-")?.to_string();
            let choice = std::fs::read_to_string(e.path().join("shmem_enabled")).ok()?;
            Some((size, choice))
        })
        .collect();
    sizes.sort_by_key(|(s, _)| s.trim_end_matches("kB").parse::<u64>().unwrap_or(0));
    let on = enabled_sizes(&top, &sizes);
    if on.is_empty() {
        return check(
            name,
            State::Ok,
            "off: frames are 4 KiB pages and a region's memory is its budget exactly \
             (64 KiB folios would fill 32-page windows 1.6x faster, fill_ways.c, but charge a \
             lone fault 64 KiB)"
                .into(),
            None,
        );
    }
    let list: Vec<String> = on.iter().map(|(s, how)| format!("{s} ({how})")).collect();
    check(
        name,
        State::Warn,
        format!(
            "on for {}: a fault alone is charged a whole folio, so a region's memory can pass \
             its budget (fills of 32-page windows run about 1.6x faster)",
            list.join(", ")
        ),
        Some(format!(
            "for budgets that hold exactly: echo never > {SYSFS}/shmem_enabled and each \
             {SYSFS}/hugepages-*/shmem_enabled"
        )),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sizes(v: &[(&str, &str)]) -> Vec<(String, String)> {
        v.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    #[test]
    fn test_the_sizes_shmem_allocates_unasked_follow_their_own_setting_or_the_top_level() {
        let per_size = sizes(&[
            ("64kB", "always inherit within_size advise [never]\n"),
            ("2048kB", "always [inherit] within_size advise never\n"),
        ]);
        let never = "always within_size advise [never] deny force\n";
        assert!(enabled_sizes(never, &per_size).is_empty());
        let always = "[always] within_size advise never deny force\n";
        assert_eq!(
            enabled_sizes(always, &per_size),
            vec![("2048kB", "always".to_string())]
        );
        // Asked for only (`advise`): the pager does not ask.
        let advise = "always within_size [advise] never deny force\n";
        assert!(enabled_sizes(advise, &per_size).is_empty());
        let own = sizes(&[("64kB", "[always] inherit within_size advise never\n")]);
        assert_eq!(
            enabled_sizes(never, &own),
            vec![("64kB", "always".to_string())]
        );
        assert_eq!(selected("garbled"), None);
    }
}
