//! The policy library, the textual forms, the container and the watchdog.

use std::time::{Duration, Instant};

use pagepilot_policy::program::asm::assemble;
use pagepilot_policy::program::disasm::disassemble;
use pagepilot_policy::program::translator::{translate, ErrorKind};
use pagepilot_policy::program::watchdog::{Periods, Watchdog};
use pagepilot_policy::program::{verify, OnOverrun, Program, ProgramPolicy, RunConfig};
use pagepilot_policy::{Fault, FaultKind, Memory, Page, Policy};

fn library() -> Vec<(String, String)> {
    let dir = format!("{}/../../policies", env!("CARGO_MANIFEST_DIR"));
    let mut out: Vec<(String, String)> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.path().extension().is_some_and(|x| x == "hp"))
        .map(|e| {
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read_to_string(e.path()).unwrap(),
            )
        })
        .collect();
    out.sort();
    out
}

#[test]
fn test_every_library_policy_translates_and_passes_the_checker() {
    let lib = library();
    for name in ["fifo2.hp", "mru.hp", "lru.hp", "seq.hp"] {
        assert!(
            lib.iter().any(|(n, _)| n == name),
            "policies/{name} missing"
        );
    }
    for (name, src) in lib {
        let p = translate(&src).unwrap_or_else(|e| panic!("{name}:{e}"));
        verify(p).unwrap_or_else(|e| panic!("{name}: {e}"));
    }
}

#[test]
fn test_disassembly_assembles_back_to_the_same_commands() {
    for (name, src) in library() {
        let p = translate(&src).unwrap();
        let text = disassemble(&p);
        let q = assemble(&text).unwrap_or_else(|e| panic!("{name}:{e}\n{text}"));
        verify(q.clone()).unwrap_or_else(|e| panic!("{name}: {e}\n{text}"));
        assert_eq!(disassemble(&q), text, "{name}");
        assert_eq!(q.code.len(), p.code.len());
    }
}

#[test]
fn test_compiled_container_round_trips_with_its_line_table() {
    let (_, src) = library()
        .into_iter()
        .find(|(n, _)| n == "fifo2.hp")
        .unwrap();
    let p = translate(&src).unwrap();
    let bytes = p.to_bytes();
    assert!(Program::is_compiled(&bytes));
    let q = Program::from_bytes(&bytes).unwrap();
    assert_eq!(q, p);
    assert_eq!(q.lines.len(), q.code.len());
    assert!(Program::from_bytes(&bytes[..bytes.len() - 1]).is_err());
    let mut wrong = bytes.clone();
    wrong[4] = 9;
    assert!(Program::from_bytes(&wrong).is_err());
}

#[test]
fn test_translator_errors_name_line_column_and_what_was_expected() {
    let e = translate("queue q;\nevent PageFault() {\n  victim = fifo(q)\n}\n").unwrap_err();
    assert_eq!((e.line, e.col), (4, 1));
    assert!(
        matches!(&e.kind, ErrorKind::Expected { expected, found } if expected.contains(';') && found.contains('}')),
        "{e}"
    );
    let e = translate("event PageFault() {\n  victim = dequeue(nothere);\n}").unwrap_err();
    assert_eq!((e.line, e.col), (2, 20));
    assert_eq!(e.kind, ErrorKind::Unknown("nothere".into()));
    let e = translate("int x;\nevent PageFault() { x = fault; }").unwrap_err();
    assert!(matches!(e.kind, ErrorKind::Type { .. }), "{e}");
    let e = translate("event PageFault() { free = 1; }").unwrap_err();
    assert_eq!(e.kind, ErrorKind::ReadOnly("free".into()));
    let e = translate("event PageFault() { break; }").unwrap_err();
    assert_eq!(e.kind, ErrorKind::OutsideLoop("break"));
}

#[test]
fn test_translated_program_without_reclaim_frame_is_rejected_by_the_checker() {
    let p = translate("queue q; event PageFault() { victim = fifo(q); }").unwrap();
    assert!(verify(p).is_err());
}

/// Eight resident pages, all referenced.
struct Full;

impl Memory for Full {
    fn slots(&self) -> usize {
        8
    }
    fn capacity(&self) -> usize {
        8
    }
    fn resident(&self) -> usize {
        8
    }
    fn is_resident(&self, slot: u32) -> bool {
        slot < 8
    }
    fn page(&self, slot: u32) -> Page {
        Page {
            slot,
            vpn: slot.into(),
        }
    }
    fn page_of(&self, vpn: u64) -> Option<Page> {
        (vpn < 8).then(|| self.page(vpn as u32))
    }
    fn is_referenced(&self, _slot: u32) -> bool {
        true
    }
    fn is_modified(&self, _slot: u32) -> bool {
        false
    }
    fn clear_referenced(&mut self, _slot: u32) {}
    fn request_frames(&mut self, _count: usize) -> usize {
        0
    }
    fn release_frames(&mut self, _count: usize) -> usize {
        0
    }
    fn flush(&mut self, _slot: u32) -> bool {
        true
    }
}

/// A watchdog that checks every 10-80 ms, so a runaway is caught quickly.
fn fast_watchdog() -> Watchdog {
    Watchdog::start(Periods {
        initial: Duration::from_millis(20),
        min: Duration::from_millis(10),
        max: Duration::from_millis(80),
    })
}

const RUNAWAY: &str = "queue q; int n;\nevent PageFault() { while (true) { n += 1; } }\nevent ReclaimFrame() { victim = fifo(q); }";

#[test]
fn test_watchdog_stops_a_runaway_with_no_budget_and_detaches_it() {
    let v = verify(translate(RUNAWAY).unwrap()).unwrap();
    let dog = fast_watchdog();
    let config = RunConfig {
        budget: Some(u64::MAX),
        timeout: Duration::from_millis(30),
        on_overrun: OnOverrun::Detach,
    };
    let mut policy = ProgramPolicy::with_watchdog("runaway", &v, config, 8, 8, &dog);
    let t = Instant::now();
    let victim = policy.victim(Page { slot: 9, vpn: 9 }, &mut Full);
    assert!(t.elapsed() < Duration::from_secs(10));
    assert_eq!(victim, None, "detached: the engine chooses");
    assert!(!policy.in_control());
    let report = policy.incidents();
    assert!(
        report[0].contains("watchdog") && report[0].contains("detached"),
        "{report:?}"
    );
    assert_eq!(dog.timeouts(), 1);
}

#[test]
fn test_budget_overrun_falls_back_and_the_fallback_serves_the_fault() {
    let v = verify(translate(RUNAWAY).unwrap()).unwrap();
    let config = RunConfig {
        budget: Some(10_000),
        ..RunConfig::default()
    };
    let mut policy = ProgramPolicy::new("runaway", &v, config, 8, 8);
    let victim = policy.victim(Page { slot: 9, vpn: 9 }, &mut Full);
    assert!(
        victim.is_some_and(|p| p.slot < 8),
        "fallback named a resident victim"
    );
    assert!(policy.incidents()[0].contains("budget (10000 commands)"));
}

#[test]
fn test_victim_that_is_not_resident_is_rejected() {
    let src = "page p;\nevent PageFault() { p = find(77); victim = fault; }\nevent ReclaimFrame() { victim = p; }";
    let v = verify(translate(src).unwrap()).unwrap();
    let mut policy = ProgramPolicy::new("liar", &v, RunConfig::default(), 8, 8);
    assert_eq!(
        policy.victim(Page { slot: 3, vpn: 3 }, &mut Full),
        None,
        "the faulting page itself"
    );
    assert!(policy.reclaim(1, &mut Full).is_empty(), "nil victim");
    assert_eq!(policy.rejected_victims(), 1);
    assert!(policy.in_control());
}

#[test]
fn test_registry_builds_programs_for_simulator_and_live_pager() {
    use pagepilot_policy::registry::{build, build_live, Built, RegistryError, Setup};
    let path = format!("{}/../../policies/mru.hp", env!("CARGO_MANIFEST_DIR"));
    let setup = Setup {
        slots: 8,
        frames: 4,
        future: None,
    };
    assert!(matches!(build(&path, &setup), Ok(Built::Live(p)) if p.name() == "mru.hp"));
    assert_eq!(
        build_live(&format!("{path}:budget=100,fallback=detach"), &setup)
            .unwrap()
            .name(),
        "mru.hp"
    );
    assert!(matches!(
        build_live("no/such/policy.hp", &setup),
        Err(RegistryError::Program(_))
    ));
    assert!(matches!(
        build(&format!("{path}:speed=9"), &setup),
        Err(RegistryError::BadParameter { .. })
    ));
}

#[test]
fn test_deeply_nested_source_is_refused_not_overflowing_the_stack() {
    let deep = format!(
        "event PageFault() {{ x = {}1{}; }}",
        "(".repeat(5000),
        ")".repeat(5000)
    );
    assert!(matches!(
        translate(&deep).unwrap_err().kind,
        ErrorKind::TooDeep(_)
    ));
    let long = format!(
        "int x; event PageFault() {{ x = 1{}; }}",
        " + 1".repeat(100_000)
    );
    assert!(matches!(
        translate(&long).unwrap_err().kind,
        ErrorKind::TooDeep(_)
    ));
    let blocks = format!("event PageFault() {}{}", "{".repeat(5000), "}".repeat(5000));
    assert!(matches!(
        translate(&blocks).unwrap_err().kind,
        ErrorKind::TooDeep(_)
    ));
}

/// `fifo2.hp` on memory whose pages stay referenced: its scan loop, which the
/// optimiser runs as one instruction, never finds a victim.
fn endless_scan(config: RunConfig, dog: &Watchdog) -> ProgramPolicy {
    let src = include_str!("../../../policies/fifo2.hp");
    let v = verify(translate(src).unwrap()).unwrap();
    let mut policy = ProgramPolicy::with_watchdog("fifo2.hp", &v, config, 10, 8, dog);
    for slot in 0..8 {
        let fault = Fault {
            page: Page {
                slot,
                vpn: slot.into(),
            },
            kind: FaultKind::Missing,
            write: false,
            time: 0,
        };
        policy.on_fault(fault, &mut Full);
    }
    policy
}

#[test]
fn test_watchdog_stops_an_endless_fused_scan_loop() {
    let dog = fast_watchdog();
    let config = RunConfig {
        budget: Some(u64::MAX),
        timeout: Duration::from_millis(30),
        on_overrun: OnOverrun::Fallback("clock".into()),
    };
    let mut policy = endless_scan(config, &dog);
    let t = Instant::now();
    let victim = policy.victim(Page { slot: 9, vpn: 9 }, &mut Full);
    assert!(t.elapsed() < Duration::from_secs(10));
    assert!(
        victim.is_some_and(|p| p.slot < 8),
        "the fallback serves the fault"
    );
    assert!(
        policy.incidents()[0].contains("watchdog"),
        "{:?}",
        policy.incidents()
    );
    assert_eq!(dog.timeouts(), 1);
}

#[test]
fn test_budget_stops_an_endless_fused_scan_loop() {
    let config = RunConfig {
        budget: Some(10_001),
        ..RunConfig::default()
    };
    let mut policy = endless_scan(config, Watchdog::global());
    let victim = policy.victim(Page { slot: 9, vpn: 9 }, &mut Full);
    assert!(
        victim.is_some_and(|p| p.slot < 8),
        "the fallback serves the fault"
    );
    assert!(
        policy.incidents()[0].contains("budget (10001 commands)"),
        "{:?}",
        policy.incidents()
    );
}
