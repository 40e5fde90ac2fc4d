//! lmdb: Python's `lmdb` package, uniform random gets (`--lmdb-gets`) over a database ~2x the
//! memory: keys are 8-byte big-endian numbers, values 400 bytes; each get touches a leaf page
//! drawn uniformly, so no order helps and the hit ratio is what the memory holds. The
//! database is opened with `readahead=False` (`MDB_NORDAHEAD`, `MADV_RANDOM` on its map), as
//! LMDB advises for random access to a database larger than the memory: with read-ahead the
//! kernel reads 128 KiB per fault and, in a small cgroup, thrashes (a 32M run read 437 GB).

use super::app::{App, Workload};
use super::data::{self, DataCx};
use super::error::AppsError;
use crate::BenchError;

/// Bump when the generator changes.
const VERSION: u32 = 1;
/// Bytes of a value.
const VALUE: u64 = 400;
/// Entries per 4 KiB leaf page with that value, filled in key order (`append`).
const PER_PAGE: u64 = 9;
/// The seed of the gets: every row gets the same keys.
const SEED: u64 = 7;

/// Writes `n` entries in key order.
const GENERATE: &str = r#"
import sys, lmdb
path, n, vsize = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
env = lmdb.open(path, map_size=max(1 << 30, 4 * n * (vsize + 64)), sync=False, metasync=False)
i = 0
while i < n:
    with env.begin(write=True) as txn:
        for j in range(i, min(n, i + 100000)):
            k = j.to_bytes(8, "big")
            txn.put(k, (k * (vsize // 8 + 1))[:vsize], append=True)
    i = min(n, i + 100000)
env.sync(True)
env.close()
"#;

/// The gets.
const GETS: &str = r#"
import sys, random, lmdb
path, gets, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
env = lmdb.open(path, readonly=True, lock=False, readahead=False)
n = env.stat()["entries"]
r = random.Random(seed)
s = 0
with env.begin(buffers=True) as txn:
    get = txn.get
    for _ in range(gets):
        v = get(r.randrange(n).to_bytes(8, "big"))
        s += v[7] + v[-1]
print(n, gets, s)
"#;

/// Makes the database once and returns the gets over it.
pub fn prepare(cx: &DataCx, gets: usize) -> Result<Workload, BenchError> {
    let dir = cx.path("lmdb", VERSION, "");
    let entries = cx.memory * 2 / 4096 * PER_PAGE;
    cx.make_with_python(
        "lmdb",
        &dir,
        "the lmdb database",
        GENERATE,
        &[entries, VALUE],
    )?;
    let file = dir.join("data.mdb");
    let bytes = data::size_of(&file)?;
    if bytes < cx.memory * 3 / 2 {
        return Err(AppsError::Data {
            app: "lmdb",
            what: format!(
                "{} holds {bytes} bytes, less than 1.5x --memory",
                file.display()
            ),
        }
        .into());
    }
    let mut argv = vec![cx.python().as_os_str().to_owned(), "-c".into(), GETS.into()];
    argv.push(dir.into_os_string());
    argv.extend([gets as u64, SEED].map(|v| v.to_string().into()));
    Ok(Workload {
        app: App::Lmdb,
        data: file,
        data_bytes: bytes,
        argv,
        env: Vec::new(),
        what: format!("{gets} uniform random gets of {entries} entries ({VALUE}-byte values)"),
    })
}
