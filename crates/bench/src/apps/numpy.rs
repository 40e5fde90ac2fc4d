//! numpy: Python k-means passes over a float32 `numpy.memmap` ~2x the memory: every pass
//! reads the whole array in chunks, assigns each point to its nearest centroid and sums the
//! points per centroid. `--numpy-passes` passes; the centroids it ends with are printed (every
//! row must print the same).

use super::app::{App, Workload};
use super::data::{self, DataCx};
use super::error::AppsError;
use crate::BenchError;

/// Bump when the generator changes.
const VERSION: u32 = 1;
/// Coordinates per point.
const DIM: u64 = 16;
/// Centroids.
const K: u64 = 8;
/// Points per chunk a pass reads at once (1 MiB of float32): small temporaries, so that the
/// process's own memory stays small beside the array.
const CHUNK: u64 = 16_384;

/// Writes `n` points of dimension `d` around `K` centres, deterministically.
const GENERATE: &str = r#"
import sys, numpy as np
path, n, d, k = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
rng = np.random.default_rng(12345)
centres = rng.normal(0.0, 10.0, size=(k, d)).astype(np.float32)
with open(path, "wb") as f:
    done = 0
    while done < n:
        m = min(1 << 16, n - done)
        x = centres[rng.integers(0, k, size=m)] + rng.normal(0.0, 1.0, size=(m, d)).astype(np.float32)
        f.write(x.astype(np.float32).tobytes())
        done += m
"#;

/// The passes: k-means from the first `k` points.
const PASSES: &str = r#"
import sys, numpy as np
path, d, k, passes, chunk = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
x = np.memmap(path, dtype=np.float32, mode="r").reshape(-1, d)
n = x.shape[0]
c = np.array(x[:k], dtype=np.float32)
eye = np.eye(k, dtype=np.float32)
for p in range(passes):
    sums = np.zeros((k, d), np.float64)
    counts = np.zeros(k, np.int64)
    cc = (c * c).sum(1)
    for s in range(0, n, chunk):
        b = x[s:s + chunk]
        a = (cc[None, :] - 2.0 * (b @ c.T)).argmin(1)
        counts += np.bincount(a, minlength=k)
        sums += eye[a].T @ b
    c = (sums / np.maximum(counts, 1)[:, None]).astype(np.float32)
print(n, passes, " ".join(str(int(v)) for v in counts), "%.3f" % float(np.abs(c).sum()))
"#;

/// Makes the array once and returns the passes over it.
pub fn prepare(cx: &DataCx, passes: usize) -> Result<Workload, BenchError> {
    let path = cx.path("numpy", VERSION, ".f32");
    let points = cx.memory * 2 / (DIM * 4);
    cx.make_with_python(
        "numpy",
        &path,
        "the numpy array",
        GENERATE,
        &[points, DIM, K],
    )?;
    let bytes = data::size_of(&path)?;
    if bytes != points * DIM * 4 {
        return Err(AppsError::Data {
            app: "numpy",
            what: format!(
                "{} holds {bytes} bytes, not {}",
                path.display(),
                points * DIM * 4
            ),
        }
        .into());
    }
    let mut argv = vec![
        cx.python().as_os_str().to_owned(),
        "-c".into(),
        PASSES.into(),
    ];
    argv.push(path.clone().into_os_string());
    argv.extend([DIM, K, passes as u64, CHUNK].map(|v| v.to_string().into()));
    Ok(Workload {
        app: App::Numpy,
        data: path,
        data_bytes: bytes,
        argv,
        // One BLAS thread in every row: the same arithmetic, in the same order.
        env: ["OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"]
            .map(|v| (v.to_string(), "1".to_string()))
            .to_vec(),
        what: format!("{passes} k-means passes (k={K}) over {points} float32 points of {DIM}"),
    })
}
