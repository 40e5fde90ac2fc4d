//! `pagepilot trace ...`: inspect, convert and record page traces.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use pagepilot_sim::trace::record::{self, RecordOptions};
use pagepilot_sim::trace::{self, Format, LoadOptions, Trace, DEFAULT_PAGE_SIZE};
use serde::Serialize;

use super::CmdResult;

/// Subcommands of `pagepilot trace`.
#[derive(clap::Subcommand)]
pub enum Command {
    /// Print references, distinct pages, footprint and writes of a trace.
    Stats(StatsArgs),
    /// Convert a trace (any readable format) to binary, text or oracle-general.
    Convert(ConvertArgs),
    /// Run a program under valgrind lackey, writing its page trace as it runs.
    Record(RecordArgs),
}

/// How to read a trace file; shared by every subcommand that loads one.
#[derive(clap::Args, Clone, Debug)]
pub struct LoadArgs {
    /// Trace format, instead of detecting it: text, lackey, binary,
    /// oracle-general, lcs-txt.
    #[arg(long = "from", visible_alias = "trace-format", value_name = "FORMAT", value_parser = parse_format)]
    pub from: Option<Format>,
    /// Page size in bytes for address traces (lackey); k/M/G suffixes allowed.
    #[arg(long, value_name = "BYTES", value_parser = parse_size, default_value_t = DEFAULT_PAGE_SIZE)]
    pub page_size: u64,
    /// Include instruction fetches of lackey traces.
    #[arg(long)]
    pub instructions: bool,
    /// Merge a reference to the same page as the one just before it.
    #[arg(long)]
    pub collapse: bool,
}

impl LoadArgs {
    /// The reader options these arguments ask for.
    pub fn options(&self) -> LoadOptions {
        LoadOptions {
            format: self.from,
            page_size: self.page_size,
            instructions: self.instructions,
            collapse_repeats: self.collapse,
        }
    }

    /// Loads `path` with these options.
    pub fn load(&self, path: &Path) -> Result<Trace, trace::TraceError> {
        trace::load_with(path, &self.options())
    }
}

/// Arguments of `pagepilot trace stats`.
#[derive(clap::Args)]
pub struct StatsArgs {
    /// The trace file (`.zst` compressed or not).
    pub trace: PathBuf,
    #[command(flatten)]
    load: LoadArgs,
    /// Output: table or json.
    #[arg(long, default_value = "table", value_parser = ["table", "json"])]
    format: String,
}

/// Arguments of `pagepilot trace convert`.
#[derive(clap::Args)]
pub struct ConvertArgs {
    /// The input trace.
    pub input: PathBuf,
    /// The output file; `.zst` compresses it.
    #[arg(short, long)]
    pub output: PathBuf,
    /// Output format: binary, text or oracle-general (libCacheSim's;
    /// default: text if OUT ends in .txt, oracle-general if it ends in
    /// .oracleGeneral, else binary).
    #[arg(long, value_parser = parse_writable)]
    to: Option<Format>,
    #[command(flatten)]
    load: LoadArgs,
}

/// Arguments of `pagepilot trace record`.
#[derive(clap::Args)]
pub struct RecordArgs {
    /// The output trace; `.zst` compresses it.
    #[arg(short, long)]
    pub output: PathBuf,
    /// Page size in bytes; k/M/G suffixes allowed.
    #[arg(long, value_name = "BYTES", value_parser = parse_size, default_value_t = DEFAULT_PAGE_SIZE)]
    page_size: u64,
    /// Include instruction fetches.
    #[arg(long)]
    instructions: bool,
    /// Merge a reference to the same page as the one just before it.
    #[arg(long)]
    collapse: bool,
    /// Output format: binary or text (default: text if OUT ends in .txt,
    /// else binary).
    #[arg(long, value_parser = parse_streamable)]
    to: Option<Format>,
    /// The Valgrind executable.
    #[arg(long, default_value = "valgrind")]
    valgrind: PathBuf,
    /// The program and its arguments, after `--`.
    #[arg(last = true, required = true, value_name = "CMD")]
    command: Vec<OsString>,
}

/// Runs `pagepilot trace ...`.
pub fn run(command: Command) -> CmdResult {
    match command {
        Command::Stats(a) => stats(a),
        Command::Convert(a) => convert(a),
        Command::Record(a) => record_cmd(a),
    }
}

/// What `trace stats` reports.
#[derive(Serialize)]
struct Stats {
    path: String,
    format: String,
    references: u64,
    distinct_pages: u64,
    page_size: u64,
    footprint_bytes: u64,
    footprint_mib: f64,
    writes: u64,
    file_bytes: u64,
    load_seconds: f64,
    load_mib_per_second: f64,
    load_references_per_second: f64,
}

fn stats(a: StatsArgs) -> CmdResult {
    let options = a.load.options();
    let format = match options.format {
        Some(f) => f,
        None => trace::detect(&a.trace)?,
    };
    let file_bytes = std::fs::metadata(&a.trace).map(|m| m.len()).unwrap_or(0);
    let start = std::time::Instant::now();
    let t = trace::load_with(
        &a.trace,
        &LoadOptions {
            format: Some(format),
            ..options
        },
    )?;
    let load_seconds = start.elapsed().as_secs_f64().max(1e-9);
    let page_size = t.page_size.unwrap_or(a.load.page_size);
    let footprint = (t.distinct() as u64).saturating_mul(page_size);
    let s = Stats {
        path: a.trace.display().to_string(),
        format: format.to_string(),
        references: t.len() as u64,
        distinct_pages: t.distinct() as u64,
        page_size,
        footprint_bytes: footprint,
        footprint_mib: footprint as f64 / (1u64 << 20) as f64,
        writes: t.write_count(),
        file_bytes,
        load_seconds,
        load_mib_per_second: file_bytes as f64 / (1u64 << 20) as f64 / load_seconds,
        load_references_per_second: t.len() as f64 / load_seconds,
    };
    let text = if a.format == "json" {
        serde_json::to_string_pretty(&s)? + "\n"
    } else {
        format!(
            "trace           {}\n\
             format          {}\n\
             references      {}\n\
             distinct pages  {}\n\
             footprint       {} bytes ({:.2} MiB at {}-byte pages)\n\
             writes          {}\n\
             loaded in       {:.3} s ({:.0} MiB/s of file, {:.1} M references/s)\n",
            s.path,
            s.format,
            s.references,
            s.distinct_pages,
            s.footprint_bytes,
            s.footprint_mib,
            s.page_size,
            s.writes,
            s.load_seconds,
            s.load_mib_per_second,
            s.load_references_per_second / 1e6
        )
    };
    print_out(&text)
}

/// Writes to stdout; a reader that went away (`| head`) is not an error.
fn print_out(text: &str) -> CmdResult {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(()),
    }
}

/// The output format: `--to`, else by the output's name.
fn output_format(to: Option<Format>, out: &Path) -> Format {
    to.unwrap_or_else(|| {
        let name = out.to_string_lossy().to_ascii_lowercase();
        let name = name.strip_suffix(".zst").unwrap_or(&name);
        if name.ends_with(".txt") {
            Format::Text
        } else if name.ends_with(".oraclegeneral") {
            Format::OracleGeneral
        } else {
            Format::Binary
        }
    })
}

fn convert(a: ConvertArgs) -> CmdResult {
    let t = a.load.load(&a.input)?;
    let format = output_format(a.to, &a.output);
    trace::save(&t, &a.output, format)?;
    eprintln!(
        "{} -> {} ({format}): {} references, {} distinct pages, {} writes",
        a.input.display(),
        a.output.display(),
        t.len(),
        t.distinct(),
        t.write_count()
    );
    Ok(())
}

fn record_cmd(a: RecordArgs) -> CmdResult {
    let options = RecordOptions {
        lackey: LoadOptions {
            format: Some(Format::Lackey),
            page_size: a.page_size,
            instructions: a.instructions,
            collapse_repeats: a.collapse,
        },
        format: output_format(a.to, &a.output),
        valgrind: a.valgrind,
    };
    let r = record::record(&a.command, &a.output, &options)?;
    eprintln!(
        "pagepilot: recorded {} references, {} distinct pages, {} writes to {}",
        r.written.references,
        r.written.pages,
        r.written.writes,
        a.output.display()
    );
    if !r.status.success() {
        return Err(format!(
            "the program exited with {} (its trace up to then is in {})",
            r.status,
            a.output.display()
        )
        .into());
    }
    Ok(())
}

fn parse_format(s: &str) -> Result<Format, String> {
    s.parse::<Format>().map_err(|e| e.to_string())
}

fn parse_writable(s: &str) -> Result<Format, String> {
    let f = parse_format(s)?;
    if f.writable() {
        Ok(f)
    } else {
        Err(format!(
            "cannot write {f} traces (only binary, text and oracle-general)"
        ))
    }
}

/// A format `trace record` writes as the program runs: binary or text.
fn parse_streamable(s: &str) -> Result<Format, String> {
    match parse_format(s)? {
        f @ (Format::Binary | Format::Text) => Ok(f),
        f => Err(format!(
            "cannot record {f} traces (only binary and text; convert after)"
        )),
    }
}

/// A byte count with an optional k/M/G (binary) suffix.
fn parse_size(s: &str) -> Result<u64, String> {
    let (digits, shift) = match s.as_bytes().last() {
        Some(b'k' | b'K') => (&s[..s.len() - 1], 10),
        Some(b'm' | b'M') => (&s[..s.len() - 1], 20),
        Some(b'g' | b'G') => (&s[..s.len() - 1], 30),
        _ => (s, 0),
    };
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("expected a byte count like 4096 or 4k, found `{s}`"))?;
    n.checked_mul(1 << shift)
        .filter(|v| v.is_power_of_two())
        .ok_or_else(|| format!("page size `{s}` is not a power of two"))
}
