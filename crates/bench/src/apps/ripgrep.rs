//! ripgrep: `rg --mmap -c PATTERN FILE` for one pattern after another (`--rg-passes`, the
//! patterns cycled), in one shell command, over a text file ~1.5x the memory: each pattern
//! is one more sequential pass over the file, each pass a new `rg` process.

use std::ffi::OsString;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use super::app::{App, Workload};
use super::data::{self, DataCx};
use crate::error::IoContext;
use crate::BenchError;

/// Bump when the generator changes.
const VERSION: u32 = 1;
/// The file's size over `--memory`: 3/2.
const SIZE_NUM: u64 = 3;
const SIZE_DEN: u64 = 2;
/// The words of the text.
const WORDS: [&str; 32] = [
    "lorem", "ipsum", "dolor", "sit", "amet", "quartz", "fox", "jumps", "over", "lazy", "dog",
    "page", "frame", "budget", "policy", "fault", "region", "kernel", "cache", "disk", "memory",
    "scan", "loop", "index", "table", "join", "query", "vector", "mapping", "file", "clock",
    "sequence",
];
/// The patterns, cycled over the passes: rare and common words, classes, anchors.
const PATTERNS: [&str; 6] = [
    "needle",
    "zebra[0-9]{3}",
    "quartz \\w+ quartz",
    "^lorem ipsum",
    "fox\\s+jumps over",
    "[0-9]{6}$",
];
/// The shell command: every pattern in turn, stopping at the first `rg` that fails.
const SCRIPT: &str =
    r#"f=$1; shift; for p in "$@"; do rg --no-config --mmap -c -e "$p" -- "$f" || exit; done"#;

/// Makes the text once and returns the passes over it.
pub fn prepare(cx: &DataCx, passes: usize) -> Result<Workload, BenchError> {
    let path = cx.path("ripgrep", VERSION, ".txt");
    let bytes = cx.memory * SIZE_NUM / SIZE_DEN;
    data::make_once(&path, "the ripgrep text", |tmp| write_text(tmp, bytes))?;
    let bytes = data::size_of(&path)?;
    let mut argv: Vec<OsString> = vec!["sh".into(), "-c".into(), SCRIPT.into(), "sh".into()];
    argv.push(path.clone().into_os_string());
    argv.extend((0..passes).map(|i| PATTERNS[i % PATTERNS.len()].into()));
    Ok(Workload {
        app: App::Ripgrep,
        data: path,
        data_bytes: bytes,
        argv,
        env: Vec::new(),
        what: format!("{passes} rg processes, one pattern each, over one text file"),
    })
}

/// Writes at least `bytes` bytes of text, deterministically (xorshift over the words).
fn write_text(path: &Path, bytes: u64) -> Result<(), BenchError> {
    let file = File::create(path).on("creating", path)?;
    let mut out = BufWriter::with_capacity(1 << 20, file);
    let mut rng = Xorshift(0x9e37_79b9_7f4a_7c15);
    let mut written = 0u64;
    let mut line = String::with_capacity(256);
    while written < bytes {
        line.clear();
        text_line(&mut rng, &mut line);
        out.write_all(line.as_bytes()).on("writing", path)?;
        written += line.len() as u64;
    }
    out.into_inner()
        .map_err(|e| e.into_error())
        .and_then(|f| f.sync_all())
        .on("writing", path)
}

/// One line: 6 to 13 words, a rare marker now and then, a number at the end.
fn text_line(rng: &mut Xorshift, line: &mut String) {
    use std::fmt::Write as _;
    let words = 6 + rng.below(8);
    for w in 0..words {
        if w > 0 {
            line.push(' ');
        }
        match rng.below(4000) {
            0 => line.push_str("needle"),
            1 => {
                let _ = write!(line, "zebra{:03}", rng.below(1000));
            }
            _ => line.push_str(WORDS[rng.below(WORDS.len() as u64) as usize]),
        }
    }
    let _ = writeln!(line, " {}", rng.below(10_000_000));
}

/// A small deterministic generator: the text is the same on every machine.
struct Xorshift(u64);

impl Xorshift {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_the_text_is_the_same_every_time_and_has_the_rare_words() {
        let lines = |seed| {
            let mut rng = Xorshift(seed);
            let mut s = String::new();
            for _ in 0..20_000 {
                text_line(&mut rng, &mut s);
            }
            s
        };
        let a = lines(0x9e37_79b9_7f4a_7c15);
        assert_eq!(a, lines(0x9e37_79b9_7f4a_7c15));
        assert!(a.contains("needle") && a.contains("zebra") && a.contains("quartz"));
        assert!(a.lines().all(|l| l.split(' ').count() >= 7));
    }
}
