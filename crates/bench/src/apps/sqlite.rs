//! sqlite: the `sqlite3` shell over a database ~1.5x the memory, read through its memory map
//! (`PRAGMA mmap_size` larger than the file), joining two tables without an index:
//! `outer_t CROSS JOIN inner_t` (CROSS JOIN fixes the order: `outer_t` outside) with
//! `automatic_index=off`, so the large `inner_t` is scanned once per outer row, a loop larger
//! than the memory. `--sqlite-outer` outer rows set how many scans one run makes.

use std::ffi::OsString;
use std::process::Command;

use super::app::{App, Workload};
use super::data::{self, DataCx};
use super::error::AppsError;
use crate::BenchError;

/// Bump when the generator changes: the file name carries it, so old data is not reused.
const VERSION: u32 = 1;
/// Bytes of padding per inner row: with its key and sqlite's cell overhead a row is
/// [`ROW_BYTES`] of the file.
const ROW_PAD: u64 = 300;
/// What one inner row takes in the file (measured: 100 000 rows of a 300-byte pad take
/// 31.7 MB, 317 bytes a row).
const ROW_BYTES: u64 = 317;
/// The database's size over `--memory`: 3/2.
const SIZE_NUM: u64 = 3;
const SIZE_DEN: u64 = 2;
/// Distinct join keys; each outer row matches `inner rows / KEYS` inner rows.
const KEYS: u64 = 1000;
/// Rows of `outer_t` (a run uses the first `--sqlite-outer`).
pub const OUTER_ROWS: usize = 10_000;

/// Makes the database once and returns the join over it.
pub fn prepare(cx: &DataCx, outer: usize) -> Result<Workload, BenchError> {
    let path = cx.path("sqlite", VERSION, ".db");
    let inner_rows = cx.memory * SIZE_NUM / SIZE_DEN / ROW_BYTES;
    data::make_once(&path, "the sqlite database", |tmp| {
        let sql = format!(
            "PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF; PRAGMA page_size=4096;
             CREATE TABLE outer_t(k INTEGER);
             WITH RECURSIVE c(x) AS (SELECT 0 UNION ALL SELECT x+1 FROM c WHERE x < {last_o})
               INSERT INTO outer_t SELECT (x * 7) % {KEYS} FROM c;
             CREATE TABLE inner_t(k INTEGER, pad BLOB);
             WITH RECURSIVE c(x) AS (SELECT 0 UNION ALL SELECT x+1 FROM c WHERE x < {last_i})
               INSERT INTO inner_t SELECT x % {KEYS}, zeroblob({ROW_PAD}) FROM c;",
            last_o = OUTER_ROWS - 1,
            last_i = inner_rows.saturating_sub(1),
        );
        data::generate("sqlite", Command::new("sqlite3").arg(tmp).arg(sql)).map(drop)
    })?;
    let bytes = data::size_of(&path)?;
    // Larger than the file, so that every page is read through the map.
    let mmap = bytes.next_power_of_two() * 2;
    let script = format!(
        "PRAGMA mmap_size={mmap}; PRAGMA automatic_index=off; \
         SELECT count(*) FROM outer_t o CROSS JOIN inner_t i \
         WHERE o.rowid <= {outer} AND i.k = o.k;"
    );
    check_plan(&path, mmap)?;
    let argv: Vec<OsString> = ["sqlite3", "-readonly", "-batch"]
        .iter()
        .map(OsString::from)
        .chain([path.clone().into_os_string(), script.into()])
        .collect();
    Ok(Workload {
        app: App::Sqlite,
        data: path,
        data_bytes: bytes,
        argv,
        env: Vec::new(),
        what: format!(
            "{outer} outer rows x a scan of inner_t ({inner_rows} rows), no index, \
             mmap_size {mmap}"
        ),
    })
}

/// Checks that this `sqlite3` maps the whole file (its build may cap `mmap_size` below the
/// file) and scans `inner_t` in the inner loop without an index.
fn check_plan(path: &std::path::Path, mmap: u64) -> Result<(), BenchError> {
    let sql = format!(
        "PRAGMA mmap_size={mmap}; PRAGMA automatic_index=off; EXPLAIN QUERY PLAN \
         SELECT count(*) FROM outer_t o CROSS JOIN inner_t i WHERE o.rowid <= 1 AND i.k = o.k;"
    );
    let out = data::generate(
        "sqlite",
        Command::new("sqlite3")
            .args(["-readonly", "-batch"])
            .arg(path)
            .arg(sql),
    )?;
    let bad = |what: String| -> BenchError {
        AppsError::Data {
            app: "sqlite",
            what,
        }
        .into()
    };
    let granted: u64 = out
        .lines()
        .next()
        .and_then(|l| l.trim().parse().ok())
        .ok_or_else(|| bad(format!("PRAGMA mmap_size answered {out:?}")))?;
    let size = data::size_of(path)?;
    if granted < size {
        return Err(bad(format!(
            "this sqlite3 maps at most {granted} bytes, less than the database's {size} \
             (SQLITE_MAX_MMAP_SIZE): use a smaller --memory"
        )));
    }
    let inner_scanned = out
        .lines()
        .any(|l| l.contains("SCAN i") && !l.contains("INDEX"));
    if !inner_scanned {
        return Err(bad(format!(
            "the join's plan does not scan inner_t: {out:?}"
        )));
    }
    Ok(())
}
