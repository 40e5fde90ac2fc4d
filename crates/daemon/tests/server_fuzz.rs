//! Many connections sending random bytes and mutated frames at once while
//! a well-behaved client keeps asking: the daemon neither panics nor stops
//! answering it correctly, and every frame the fuzzers held is returned.

mod live;

use std::io::Write;
use std::time::{Duration, Instant};

use live::*;
use pagepilot_protocol::{encode, Message, RegionFiles, RegionId};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const CONFIG: &str = "
[machine]
budget_frames = 1000
deadline_ms = 50

[default]
frames = 200
connections = 1000
descriptors = 10000
";

/// Valid frames to start mutating from.
fn seeds() -> Vec<Vec<u8>> {
    let region = RegionId(1);
    [
        hello(),
        register(1, 5, 50, RegionFiles::default()),
        Message::RequestFrames { region, frames: 20 },
        Message::ReleaseFrames { region, frames: 3 },
        Message::Returned { region, frames: 2 },
        Message::Pin {
            region,
            offset: 0,
            len: 4096,
        },
        Message::Report {
            region,
            faults: 10,
            postponed_faults: 1,
        },
        Message::Status,
        Message::UnregisterRegion { region },
    ]
    .iter()
    .map(|m| encode(m).unwrap())
    .collect()
}

/// What one fuzzing connection sends: valid frames, mutated ones, random
/// bytes, in random-sized writes.
fn garbage(rng: &mut StdRng, seeds: &[Vec<u8>]) -> Vec<u8> {
    let mut out = encode(&hello()).unwrap();
    for _ in 0..rng.gen_range(1..20) {
        let mut frame = seeds[rng.gen_range(0..seeds.len())].clone();
        match rng.gen_range(0..6) {
            0 => {}
            1 => {
                let i = rng.gen_range(0..frame.len());
                frame[i] ^= 1 << rng.gen_range(0..8);
            }
            2 => {
                let i = rng.gen_range(0..frame.len());
                frame[i] = rng.gen();
            }
            3 => frame.truncate(rng.gen_range(0..frame.len())),
            4 => frame.extend((0..rng.gen_range(1..64)).map(|_| rng.gen::<u8>())),
            _ => frame = (0..rng.gen_range(1..200)).map(|_| rng.gen()).collect(),
        }
        out.extend(frame);
    }
    out
}

#[test]
fn random_bytes_and_mutated_frames_from_many_connections_never_stop_the_daemon() {
    let daemon = Daemon::start_with(CONFIG, |o| o.frame_timeout = Duration::from_millis(300));
    let seeds = seeds();
    let fuzzers: Vec<_> = (0..4u64)
        .map(|t| {
            let socket = daemon.socket.clone();
            let seeds = seeds.clone();
            std::thread::spawn(move || {
                let mut rng = StdRng::seed_from_u64(0x5eed + t);
                for _ in 0..150 {
                    let Ok(mut s) = std::os::unix::net::UnixStream::connect(&socket) else {
                        continue;
                    };
                    let bytes = garbage(&mut rng, &seeds);
                    for chunk in bytes.chunks(rng.gen_range(1..64)) {
                        if s.write_all(chunk).is_err() {
                            break;
                        }
                    }
                    // Some hang up at once, some linger without reading.
                    if rng.gen_bool(0.2) {
                        std::thread::sleep(Duration::from_millis(rng.gen_range(0..20)));
                    }
                }
            })
        })
        .collect();
    let mut good = daemon.client();
    good.register(9, 10, 100);
    let start = Instant::now();
    let mut asked = 0;
    while fuzzers.iter().any(|f| !f.is_finished()) {
        assert!(start.elapsed() < Duration::from_secs(60), "fuzzers stuck");
        let reply = good.request(&Message::RequestFrames {
            region: RegionId(9),
            frames: 1,
        });
        assert!(
            matches!(
                reply,
                Message::Granted {
                    region: RegionId(9),
                    ..
                }
            ),
            "{reply:?}"
        );
        let reply = good.request(&Message::ReleaseFrames {
            region: RegionId(9),
            frames: 1,
        });
        assert!(
            matches!(
                reply,
                Message::Released {
                    region: RegionId(9),
                    ..
                }
            ),
            "{reply:?}"
        );
        asked += 1;
    }
    for f in fuzzers {
        f.join().unwrap();
    }
    assert!(asked > 0);
    // Once every fuzzer is gone, only the good client holds frames.
    let s = daemon.until("the fuzzers to be gone", |s| s.clients.len() == 2);
    let held: u64 = s
        .clients
        .iter()
        .flat_map(|c| &c.regions)
        .map(|r| r.held_frames)
        .sum();
    assert_eq!(s.free_frames + held, 1000);
    assert!(matches!(
        good.request(&Message::Status),
        Message::StatusReply(_)
    ));
    daemon.stop();
}
