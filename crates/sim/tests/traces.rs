//! Trace readers and writers: every format parses, round-trips, reports
//! malformed input with its position and never panics.

use std::io::Cursor;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

use pagepilot_sim::trace::{
    self, binary, lackey, lcs, text, Format, LoadOptions, Position, Trace, TraceError,
};
use proptest::prelude::*;

/// A fresh path in the temp directory, removed when dropped.
struct TempFile(PathBuf);

impl TempFile {
    fn new(name: &str) -> Self {
        static N: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "pagepilot-traces-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        TempFile(dir.join(name))
    }

    fn with(name: &str, bytes: &[u8]) -> Self {
        let f = Self::new(name);
        std::fs::write(&f.0, bytes).unwrap();
        f
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        if let Some(dir) = self.0.parent() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

fn vpns(t: &Trace) -> Vec<u64> {
    t.vpns().collect()
}

fn write_flags(t: &Trace) -> Vec<bool> {
    (0..t.len()).map(|i| t.is_write(i)).collect()
}

fn malformed_at(e: TraceError) -> (Position, String) {
    match e {
        TraceError::Malformed { at, what, .. } => (at, what),
        other => panic!("expected Malformed, got {other:?}"),
    }
}

fn lackey_opts(page_size: u64, instructions: bool) -> LoadOptions {
    LoadOptions {
        format: Some(Format::Lackey),
        page_size,
        instructions,
        ..LoadOptions::default()
    }
}

// ---- text ----------------------------------------------------------------

#[test]
fn test_text_reads_decimal_hex_comments_and_write_marks() {
    let src = b"# header\n5\n0x10 # hex\n\n  7 w\r\n0X1f r\n5";
    let t = text::read(Cursor::new(&src[..]), Path::new("t.txt")).unwrap();
    assert_eq!(vpns(&t), vec![5, 16, 7, 31, 5]);
    assert_eq!(write_flags(&t), vec![false, false, true, false, false]);
    assert_eq!(t.distinct(), 4);
    assert_eq!(t.slot_of(16), Some(1));
}

#[test]
fn test_text_error_names_file_and_line() {
    let f = TempFile::with("bad.txt", b"1\n# c\n2\n12abc\n3\n");
    let e = trace::load(&f.0).unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains("bad.txt") && msg.contains("line 4"), "{msg}");
    assert_eq!(malformed_at(e).0, Position::Line(4));
}

#[test]
fn test_text_rejects_overflowing_number_and_bad_flag() {
    let e = text::read(Cursor::new(&b"18446744073709551616\n"[..]), Path::new("x")).unwrap_err();
    assert_eq!(malformed_at(e).0, Position::Line(1));
    let e = text::read(Cursor::new(&b"1\n2 x\n"[..]), Path::new("x")).unwrap_err();
    assert_eq!(malformed_at(e).0, Position::Line(2));
}

#[test]
fn test_empty_and_comment_only_traces_are_empty_errors() {
    for content in [&b""[..], b"# nothing\n\n", b"==1== only valgrind talk\n"] {
        let f = TempFile::with("e.txt", content);
        assert!(matches!(trace::load(&f.0), Err(TraceError::Empty { .. })));
    }
    let f = TempFile::with("e.pptrace", b"");
    let e = trace::load_with(
        &f.0,
        &LoadOptions {
            format: Some(Format::Binary),
            ..Default::default()
        },
    )
    .unwrap_err();
    assert_eq!(malformed_at(e).0, Position::Offset(0));
}

#[test]
fn test_text_round_trip_keeps_pages_writes_and_page_size() {
    let mut t = Trace::new();
    for (i, v) in [3u64, 1 << 40, 3, 7, 0].into_iter().enumerate() {
        t.push(v, i % 2 == 1);
    }
    t.page_size = Some(8192);
    let f = TempFile::new("rt.txt");
    trace::save(&t, &f.0, Format::Text).unwrap();
    let back = trace::load(&f.0).unwrap();
    assert_eq!(vpns(&back), vpns(&t));
    assert_eq!(write_flags(&back), write_flags(&t));
    assert_eq!(back.page_size, Some(8192));
}

// ---- binary --------------------------------------------------------------

fn sample() -> Trace {
    let mut t = Trace::new();
    for i in 0..1000u64 {
        t.push((i * 7919) % 97 + 0x7fff_0000, i % 3 == 0);
    }
    t.page_size = Some(4096);
    t
}

fn encode(t: &Trace) -> Vec<u8> {
    let mut out = Vec::new();
    binary::write(t, &mut out).unwrap();
    out
}

#[test]
fn test_binary_round_trip_keeps_refs_pages_writes_page_size() {
    let t = sample();
    let f = TempFile::new("s.pptrace");
    trace::save(&t, &f.0, Format::Binary).unwrap();
    let back = trace::load(&f.0).unwrap();
    assert_eq!(back.refs, t.refs);
    assert_eq!(back.pages, t.pages);
    assert_eq!(write_flags(&back), write_flags(&t));
    assert_eq!(back.page_size, Some(4096));
    assert_eq!(back.slot_of(t.pages[5]), Some(5));
    // Binary is found by its magic, whatever the name.
    let g = TempFile::with("no-extension", &encode(&t));
    assert_eq!(trace::detect(&g.0).unwrap(), Format::Binary);
}

#[test]
fn test_binary_without_writes_has_no_bitset() {
    let t = Trace::from_pages([1, 2, 3, 1]);
    let bytes = encode(&t);
    assert_eq!(bytes.len(), 48 + 4 * 4 + 8 * 3);
    let back = binary::read(Cursor::new(bytes), Path::new("x")).unwrap();
    assert!(!back.has_writes());
    assert_eq!(back.page_size, None);
}

#[test]
fn test_binary_streaming_writer_matches_whole_trace_writer() {
    let t = sample();
    let mut cur = Cursor::new(Vec::new());
    let mut w = binary::BinaryWriter::new(&mut cur, 4096).unwrap();
    for (i, v) in t.vpns().enumerate() {
        w.push(v, t.is_write(i)).unwrap();
    }
    let written = w.finish().unwrap();
    assert_eq!(written.references, 1000);
    assert_eq!(written.pages, t.distinct() as u64);
    assert_eq!(written.writes, t.write_count());
    assert_eq!(cur.into_inner(), encode(&t));
}

fn binary_error(bytes: Vec<u8>) -> (Position, String) {
    let f = TempFile::with("b.pptrace", &bytes);
    let e = trace::load(&f.0).unwrap_err();
    assert!(e.to_string().contains("b.pptrace"), "{e}");
    malformed_at(e)
}

#[test]
fn test_binary_errors_name_byte_offsets() {
    let good = encode(&Trace::from_pages([10, 11, 10, 12]));
    // Truncated inside the reference array (48 + 4*4 refs; cut after 2 refs + 1 byte).
    let (at, what) = binary_error(good[..48 + 9].to_vec());
    assert_eq!(at, Position::Offset(48 + 9), "{what}");
    // Wrong version.
    let mut b = good.clone();
    b[8] = 9;
    assert_eq!(binary_error(b).0, Position::Offset(8));
    // Unknown flag.
    let mut b = good.clone();
    b[13] = 1;
    assert_eq!(binary_error(b).0, Position::Offset(12));
    // A slot used before the one below it: third reference (offset 56) says 3.
    let mut b = good.clone();
    b[56] = 3;
    let (at, what) = binary_error(b);
    assert_eq!(at, Position::Offset(56), "{what}");
    // A page listed twice in the page table (slot 2 at 48+16+16).
    let mut b = good.clone();
    b[48 + 16 + 16..48 + 16 + 24].copy_from_slice(&10u64.to_le_bytes());
    assert_eq!(binary_error(b).0, Position::Offset(48 + 16 + 16));
    // Trailing garbage makes the length disagree with the header.
    let mut b = good.clone();
    b.push(0);
    let (_, what) = binary_error(b);
    assert!(what.contains("header describes"), "{what}");
    // Bad magic.
    assert_eq!(
        binary_error(b"PPTRACX\0rest".to_vec()).0,
        Position::Offset(0)
    );
}

#[test]
fn test_binary_unfinished_and_lying_headers_are_refused_without_huge_allocation() {
    let mut cur = Cursor::new(Vec::new());
    let mut w = binary::BinaryWriter::new(&mut cur, 4096).unwrap();
    w.push(1, false).unwrap();
    drop(w);
    let (at, what) = binary_error(cur.into_inner());
    assert_eq!(at, Position::Offset(12), "{what}");
    // A header claiming 2^40 references over a stream of unknown length
    // (compressed): refused when the data runs out, not by allocating.
    let mut b = encode(&Trace::from_pages([1]));
    b[24..32].copy_from_slice(&(1u64 << 40).to_le_bytes());
    let z = zstd::encode_all(&b[..], 1).unwrap();
    let f = TempFile::with("lie.pptrace.zst", &z);
    let (at, what) = malformed_at(trace::load(&f.0).unwrap_err());
    // The page table's 8 bytes are read as references; the data ends at 60.
    assert_eq!(at, Position::Offset(60), "{what}");
}

// ---- zstd ----------------------------------------------------------------

#[test]
fn test_zst_input_is_read_transparently_for_every_format() {
    let t = sample();
    let cases: Vec<(&str, Vec<u8>, LoadOptions)> = vec![
        ("a.pptrace.zst", encode(&t), LoadOptions::default()),
        (
            "a.txt.zst",
            b"1\n2\n0x3 w\n".to_vec(),
            LoadOptions::default(),
        ),
        (
            "a.lackey.zst",
            b"==1== hi\n L 1000,4\n S 2000,8\n".to_vec(),
            LoadOptions::default(),
        ),
        (
            "a.oracleGeneral.zst",
            oracle(&[5, 6, 5]),
            LoadOptions::default(),
        ),
        (
            "a.lcs.txt.zst",
            b"a\nb\na\n".to_vec(),
            LoadOptions {
                format: Some(Format::LcsTxt),
                ..Default::default()
            },
        ),
    ];
    for (name, plain, opts) in cases {
        let p = TempFile::with(name.trim_end_matches(".zst"), &plain);
        let z = TempFile::with(name, &zstd::encode_all(&plain[..], 3).unwrap());
        let a = trace::load_with(&p.0, &opts).unwrap();
        let b = trace::load_with(&z.0, &opts).unwrap();
        assert_eq!(vpns(&a), vpns(&b), "{name}");
        assert_eq!(write_flags(&a), write_flags(&b), "{name}");
    }
    // Compressed output round-trips too.
    let f = TempFile::new("out.pptrace.zst");
    trace::save(&t, &f.0, Format::Binary).unwrap();
    assert_eq!(
        &std::fs::read(&f.0).unwrap()[..4],
        &[0x28, 0xb5, 0x2f, 0xfd]
    );
    assert_eq!(trace::load(&f.0).unwrap().refs, t.refs);
}

#[test]
fn test_zst_binary_error_offsets_count_decompressed_bytes() {
    let good = encode(&Trace::from_pages([10, 11, 10, 12]));
    let z = zstd::encode_all(&good[..48 + 6], 3).unwrap();
    let f = TempFile::with("cut.pptrace.zst", &z);
    assert_eq!(
        malformed_at(trace::load(&f.0).unwrap_err()).0,
        Position::Offset(54)
    );
}

// ---- lackey --------------------------------------------------------------

const LACKEY: &[u8] = b"==42== Lackey, an example Valgrind tool\n\
==42== Command: ./a.out\n\
==42== \n\
I  04001e30,3\n \
L 00000ffe,4\n \
S 00002000,8\n \
M 00003ff8,8\n\
I  00005ffe,4\n\
--42-- some debug line\n \
L 1fff000748,8\n";

#[test]
fn test_lackey_page_crossing_access_touches_both_pages() {
    let t = lackey::read(
        Cursor::new(LACKEY),
        Path::new("l"),
        &lackey_opts(4096, false),
    )
    .unwrap();
    // L 0xffe,4 spans pages 0 and 1; S 0x2000 is page 2; M 0x3ff8,8 ends at 0x3fff: page 3 only.
    assert_eq!(vpns(&t), vec![0, 1, 2, 3, 0x1fff000748 >> 12]);
    assert_eq!(write_flags(&t), vec![false, false, true, true, false]);
    assert_eq!(t.page_size, Some(4096));
}

#[test]
fn test_lackey_instruction_fetches_are_optional_reads() {
    let t = lackey::read(
        Cursor::new(LACKEY),
        Path::new("l"),
        &lackey_opts(4096, true),
    )
    .unwrap();
    assert_eq!(
        vpns(&t),
        vec![0x4001e30 >> 12, 0, 1, 2, 3, 5, 6, 0x1fff000748 >> 12]
    );
    assert!(!t.is_write(0) && !t.is_write(5) && !t.is_write(6));
}

#[test]
fn test_lackey_page_size_is_configurable() {
    let t = lackey::read(
        Cursor::new(LACKEY),
        Path::new("l"),
        &lackey_opts(8192, false),
    )
    .unwrap();
    assert_eq!(vpns(&t), vec![0, 1, 1, 0x1fff000748 >> 13]);
    let t = lackey::read(
        Cursor::new(LACKEY),
        Path::new("l"),
        &lackey_opts(1 << 16, false),
    )
    .unwrap();
    assert_eq!(t.distinct(), 2);
    let bad = TempFile::with("x.lackey", LACKEY);
    assert!(matches!(
        trace::load_with(&bad.0, &lackey_opts(3000, false)),
        Err(TraceError::BadPageSize(3000))
    ));
}

#[test]
fn test_lackey_is_detected_and_errors_name_the_line() {
    let f = TempFile::with("run.log", LACKEY);
    assert_eq!(trace::detect(&f.0).unwrap(), Format::Lackey);
    let mut bad = LACKEY.to_vec();
    bad.extend_from_slice(b" L zz,4\n");
    let f = TempFile::with("run.log", &bad);
    let (at, what) = malformed_at(trace::load(&f.0).unwrap_err());
    assert_eq!(at, Position::Line(11), "{what}");
    for (line, what) in [
        (&b" X 1000,4"[..], "expected"),
        (b" L 1000", "expected"),
        (b" L 1000,", "size"),
        (b" L ffffffffffffffff,2", "address space"),
        (b" L 0,100000000", "spans"),
    ] {
        let e =
            lackey::read(Cursor::new(line), Path::new("l"), &lackey_opts(4096, false)).unwrap_err();
        let (at, msg) = malformed_at(e);
        assert_eq!(at, Position::Line(1));
        assert!(msg.contains(what), "{msg}");
    }
}

#[test]
fn test_collapse_merges_only_immediate_repeats_and_keeps_writes() {
    let src = b" L 1000,4\n L 1004,4\n S 1008,4\n L 2000,4\n L 1000,4\n";
    let mut o = lackey_opts(4096, false);
    let t = lackey::read(Cursor::new(&src[..]), Path::new("l"), &o).unwrap();
    assert_eq!(vpns(&t), vec![1, 1, 1, 2, 1]);
    o.collapse_repeats = true;
    let t = lackey::read(Cursor::new(&src[..]), Path::new("l"), &o).unwrap();
    assert_eq!(vpns(&t), vec![1, 2, 1]);
    assert_eq!(write_flags(&t), vec![true, false, false]);
}

// ---- libCacheSim ---------------------------------------------------------

fn oracle(ids: &[u64]) -> Vec<u8> {
    let mut out = Vec::new();
    for (i, &id) in ids.iter().enumerate() {
        out.extend_from_slice(&(i as u32).to_le_bytes());
        out.extend_from_slice(&id.to_le_bytes());
        out.extend_from_slice(&4096u32.to_le_bytes());
        out.extend_from_slice(&(-1i64).to_le_bytes());
    }
    out
}

#[test]
fn test_oracle_general_records_map_object_ids_to_pages() {
    let f = TempFile::with("w.oracleGeneral.bin", &oracle(&[7, 1 << 50, 7, 9]));
    assert_eq!(trace::detect(&f.0).unwrap(), Format::OracleGeneral);
    let t = trace::load(&f.0).unwrap();
    assert_eq!(vpns(&t), vec![7, 1 << 50, 7, 9]);
    let mut cut = oracle(&[1, 2, 3]);
    cut.truncate(24 * 2 + 10);
    let e = lcs::read_oracle_general(Cursor::new(cut), Path::new("o"), &Default::default())
        .unwrap_err();
    let (at, what) = malformed_at(e);
    assert_eq!(at, Position::Offset(48), "{what}");
}

#[test]
fn test_lcs_txt_numeric_and_string_ids() {
    let t = lcs::read_txt(
        Cursor::new(&b"10\n0x10\n010\n\n10\n"[..]),
        Path::new("x"),
        &Default::default(),
    )
    .unwrap();
    assert_eq!(vpns(&t), vec![10, 16, 8, 10]);
    let t = lcs::read_txt(
        Cursor::new(&b"obj-a\nobj-b\n12\nobj-a\n"[..]),
        Path::new("x"),
        &Default::default(),
    )
    .unwrap();
    assert_eq!(vpns(&t), vec![0, 1, 2, 0]);
    let e = lcs::read_txt(
        Cursor::new(&b"1\n2\nthree\n"[..]),
        Path::new("x"),
        &Default::default(),
    )
    .unwrap_err();
    assert_eq!(malformed_at(e).0, Position::Line(3));
}

#[test]
fn test_unknown_binary_content_asks_for_format() {
    let f = TempFile::with("mystery.dat", &[0u8, 1, 2, 3, 0xff]);
    assert!(matches!(
        trace::load(&f.0),
        Err(TraceError::Undetected { .. })
    ));
    assert!("nope".parse::<Format>().is_err());
    for f in Format::ALL {
        assert_eq!(f.name().parse::<Format>().unwrap(), f);
    }
}

// ---- robustness ----------------------------------------------------------

fn all_readers(bytes: &[u8]) {
    let p = Path::new("fuzz");
    let o = LoadOptions::default();
    let _ = text::read(Cursor::new(bytes), p);
    let _ = lackey::read(Cursor::new(bytes), p, &lackey_opts(4096, true));
    let _ = lackey::read(Cursor::new(bytes), p, &lackey_opts(1, true));
    let _ = binary::read_with(Cursor::new(bytes), p, None, &o);
    let _ = binary::read_with(Cursor::new(bytes), p, Some(bytes.len() as u64), &o);
    let _ = lcs::read_oracle_general(Cursor::new(bytes), p, &o);
    let _ = lcs::read_txt(Cursor::new(bytes), p, &o);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn test_random_bytes_never_panic_any_reader(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        all_readers(&bytes);
    }

    #[test]
    fn test_corrupted_binary_traces_never_panic(
        ids in proptest::collection::vec(0u64..50, 1..200),
        flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..6),
        cut in any::<usize>(),
    ) {
        let mut t = Trace::new();
        for (i, v) in ids.iter().enumerate() {
            t.push(*v, i % 5 == 0);
        }
        let mut b = encode(&t);
        for (at, x) in flips {
            let n = b.len();
            b[at % n] ^= x;
        }
        b.truncate(b.len() - cut % 8);
        all_readers(&b);
    }

    #[test]
    fn test_random_lackey_like_text_never_panics(
        lines in proptest::collection::vec(("[ILSM =-]{1,3}", any::<u64>(), any::<u64>()), 0..50)
    ) {
        let mut s = String::new();
        for (k, a, z) in lines {
            s.push_str(&format!("{k}{a:x},{z}\n"));
        }
        all_readers(s.as_bytes());
    }

    #[test]
    fn test_random_files_through_load_never_panic(
        bytes in proptest::collection::vec(any::<u8>(), 0..300),
        zstd_magic in any::<bool>(),
    ) {
        let mut content = if zstd_magic { vec![0x28, 0xb5, 0x2f, 0xfd] } else { Vec::new() };
        content.extend_from_slice(&bytes);
        let f = TempFile::with("fuzz.bin", &content);
        let _ = trace::load(&f.0);
        for format in Format::ALL {
            let _ = trace::load_with(&f.0, &LoadOptions { format: Some(format), ..Default::default() });
        }
    }

    #[test]
    fn test_binary_round_trip_of_random_traces(
        refs in proptest::collection::vec((any::<u64>(), any::<bool>()), 1..300),
        dup in 1u64..20,
    ) {
        let mut t = Trace::new();
        for (v, w) in &refs {
            t.push(v % (dup * 3 + 1) * 0x1_0000_0001, *w);
        }
        let back = binary::read(Cursor::new(encode(&t)), Path::new("x")).unwrap();
        prop_assert_eq!(&back.refs, &t.refs);
        prop_assert_eq!(&back.pages, &t.pages);
        prop_assert_eq!(write_flags(&back), write_flags(&t));
    }
}
