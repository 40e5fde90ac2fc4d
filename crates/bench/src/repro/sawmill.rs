//! SawMill (Gefflaut et al.): the Appel-Li virtual memory primitives of its
//! Table 1, from `bench appel-li`. The paper's SawMill column against its
//! OSF/1 column (a monolithic kernel) is set beside pagepilot (faults served
//! in the faulting thread, write protection through userfaultfd) against
//! Linux's `mprotect` and SIGSEGV.

use super::report::{Claim, Relation};
use super::{bench_args, json, strings, Ctx, ExpError, Outcome};

/// Table 1: `bench appel-li`.
pub(super) fn run(cx: &Ctx) -> Result<Outcome, ExpError> {
    super::need_userfaultfd()?;
    let argv = strings(&[
        "--reps",
        cx.size.pick("300", "2000", "5000"),
        "--runs",
        cx.size.pick("1", "3", "5"),
        "--format",
        "json",
    ]);
    let (args, command) = bench_args::<crate::appel_li::Args>("appel-li", &argv)?;
    let r = crate::appel_li::measure_all(&args)?;
    let claims = r
        .rows
        .iter()
        .filter_map(|row| {
            let p = row.paper_us?;
            Some(
                Claim::new(
                    format!("{}: user-level VM / monolithic kernel", row.primitive),
                    "Table 1",
                    Relation::AtMost,
                    p.sawmill / p.osf1,
                    Some(row.ratio_sigbus),
                    "x",
                )
                .with_note(format!(
                    "paper SawMill {} / OSF/1 {} us; ours uffd SIGBUS {:.2} / Linux {:.2} us",
                    p.sawmill, p.osf1, row.uffd_sigbus_us, row.linux_us
                )),
            )
        })
        .collect();
    Ok(Outcome {
        claims,
        commands: vec![command],
        notes: vec!["`<=`: the paper's user-level system is at most as costly, relative to its monolithic kernel, as the paper's ratio; ours is pagepilot against Linux on the same machine.".into()],
        data: json(&r),
        ..Outcome::default()
    })
}
