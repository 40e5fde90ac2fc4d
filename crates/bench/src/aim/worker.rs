//! One simulated user of `pagepilot bench aim`: a process of its own (the
//! bench re-executed, [`crate::child`]) that, once told to go, runs jobs
//! drawn from its mix with a seeded RNG until its time is up, and reports
//! how many it completed. It never uses pagepilot.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use rand::{rngs::StdRng, seq::SliceRandom, Rng, SeedableRng};
use serde::{Deserialize, Serialize};

use super::AimError;
use crate::error::IoContext;
use crate::BenchResult;

/// Bytes a file job writes, syncs and reads back.
const FILE_BYTES: usize = 256 << 10;
/// The memory job's buffer: well beyond the caches, so touches miss.
const MEMORY_BYTES: usize = 24 << 20;
/// Pages a memory job touches, in a random order.
const MEMORY_TOUCHES: usize = 4096;
/// Rounds of the compute job's arithmetic kernel.
const COMPUTE_ROUNDS: u64 = 1 << 20;
const PAGE: usize = 4096;

/// What a worker is told.
#[derive(Clone, Serialize, Deserialize)]
pub struct Job {
    /// Weights of compute, file and memory jobs.
    pub weights: [u32; 3],
    /// How long it runs its jobs.
    pub seconds: f64,
    /// Its RNG's seed.
    pub seed: u64,
    /// The file its file jobs write (removed at the end).
    pub file: PathBuf,
}

/// What a worker did.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize)]
pub struct WorkerRun {
    /// Jobs completed, all kinds.
    pub jobs: u64,
    /// Jobs completed of each kind: compute, file, memory.
    pub by_kind: [u64; 3],
    /// From go to its last job's end, ns.
    pub elapsed_ns: u64,
    /// Checksum of the jobs' results (keeps the work from being optimized away).
    pub checksum: u64,
}

/// The worker's side: waits for `go` on stdin, runs, prints its [`WorkerRun`].
pub fn child_main(job: Job) -> BenchResult {
    let mut rng = StdRng::seed_from_u64(job.seed);
    let mut memory = vec![0u8; MEMORY_BYTES];
    let mut order: Vec<usize> = (0..MEMORY_BYTES / PAGE).collect();
    let mut buf = vec![0u8; FILE_BYTES];
    let mut back = vec![0u8; FILE_BYTES];
    let mut file = File::options()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&job.file)
        .on("creating", &job.file)?;
    let mut go = String::new();
    std::io::stdin()
        .read_line(&mut go)
        .doing("waiting for the parent's go")?;
    let total: u32 = job.weights.iter().sum();
    let limit = Duration::from_secs_f64(job.seconds);
    let mut run = WorkerRun::default();
    let t0 = Instant::now();
    while t0.elapsed() < limit {
        let mut pick = rng.gen_range(0..total.max(1));
        let kind = job
            .weights
            .iter()
            .position(|&w| {
                let here = pick < w;
                pick = pick.saturating_sub(w);
                here
            })
            .unwrap_or(0);
        let sum = match kind {
            0 => compute(rng.gen()),
            1 => file_job(&mut file, &job.file, &mut buf, &mut back, rng.gen())?,
            _ => {
                order.shuffle(&mut rng);
                touch(&mut memory, &order[..MEMORY_TOUCHES.min(order.len())])
            }
        };
        run.checksum = run.checksum.wrapping_add(sum);
        run.by_kind[kind] += 1;
        run.jobs += 1;
    }
    run.elapsed_ns = t0.elapsed().as_nanos() as u64;
    drop(file);
    let _ = std::fs::remove_file(&job.file);
    Ok(crate::child::report(&run)?)
}

/// The compute job: a fixed arithmetic kernel (xorshift mixed with a
/// multiply-add), no memory beyond registers.
fn compute(seed: u64) -> u64 {
    let (mut x, mut acc) = (seed | 1, 0u64);
    for i in 0..COMPUTE_ROUNDS {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        acc = acc.wrapping_mul(31).wrapping_add(x ^ i);
    }
    std::hint::black_box(acc)
}

/// The file job: writes `buf` (filled from `seed`), syncs it, reads it back
/// and checks it.
fn file_job(
    file: &mut File,
    path: &PathBuf,
    buf: &mut [u8],
    back: &mut [u8],
    seed: u64,
) -> Result<u64, crate::BenchError> {
    for (i, chunk) in buf.chunks_exact_mut(8).enumerate() {
        chunk.copy_from_slice(&seed.wrapping_add(i as u64).to_ne_bytes());
    }
    file.seek(SeekFrom::Start(0)).on("seeking", path)?;
    file.write_all(buf).on("writing", path)?;
    file.sync_data().on("syncing", path)?;
    file.seek(SeekFrom::Start(0)).on("seeking", path)?;
    file.read_exact(back).on("reading", path)?;
    if buf != back {
        return Err(AimError::ReadBack(path.clone()).into());
    }
    Ok(seed)
}

/// The memory job: one write to each page of `order`, then a sum of them.
fn touch(memory: &mut [u8], order: &[usize]) -> u64 {
    let mut sum = 0u64;
    for &p in order {
        let b = &mut memory[p * PAGE + (p % 64) * 8];
        *b = b.wrapping_add(1);
        sum = sum.wrapping_add(u64::from(*b));
    }
    std::hint::black_box(sum)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_the_jobs_are_deterministic_and_the_file_reads_back() {
        assert_eq!(compute(7), compute(7));
        let mut memory = vec![0u8; 4 * PAGE];
        assert_eq!(touch(&mut memory, &[0, 2, 3]), 3);
        let path = std::env::temp_dir().join(format!("aim-worker-test-{}", std::process::id()));
        let mut file = File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .unwrap();
        let (mut buf, mut back) = (vec![0u8; PAGE], vec![0u8; PAGE]);
        assert_eq!(
            file_job(&mut file, &path, &mut buf, &mut back, 5).unwrap(),
            5
        );
        std::fs::remove_file(&path).unwrap();
    }
}
