//! The proxy against a real redis-server: the delay it adds to a PING,
//! byte order under pipelined traffic, large values, bad arguments, and a
//! clean end on SIGTERM.

mod common;

use common::{connect, median_ping, Proxy, Redis, PROXY};
use std::io::{Read, Write};
use std::process::Command;
use std::time::{Duration, Instant};

/// The median PING round trip, direct and through proxies adding 100 us
/// and 500 us, in interleaved rounds (the machine is shared and noisy).
/// Printed as a table (`--nocapture`); the round trip through a proxy is
/// at least the asked one, and not wildly more.
#[test]
fn ping_round_trip_adds_the_asked_delay() {
    let redis = Redis::start();
    let asked = [("0", 0u64), ("100us", 100), ("500us", 500)];
    let proxies: Vec<Proxy> = asked
        .iter()
        .map(|(r, _)| Proxy::start(redis.port, r))
        .collect();
    let mut direct = connect(redis.port);
    let mut via: Vec<_> = proxies.iter().map(|p| connect(p.port)).collect();
    let (rounds, per_round) = (10, 200);
    let mut medians = vec![Vec::new(); 1 + via.len()];
    for _ in 0..rounds {
        medians[0].push(median_ping(&mut direct, per_round));
        for (i, s) in via.iter_mut().enumerate() {
            medians[i + 1].push(median_ping(s, per_round));
        }
    }
    let median = |v: &mut Vec<Duration>| {
        v.sort();
        v[v.len() / 2]
    };
    let base = median(&mut medians[0]);
    println!("PING round trip, medians of {rounds} x {per_round}:");
    println!("  direct            {:>7.1} us", base.as_secs_f64() * 1e6);
    for (i, (text, micros)) in asked.iter().enumerate() {
        let m = median(&mut medians[i + 1]);
        println!(
            "  proxy --rtt {text:<5} {:>7.1} us (added {:.1} us)",
            m.as_secs_f64() * 1e6,
            (m.saturating_sub(base)).as_secs_f64() * 1e6
        );
        let asked = Duration::from_micros(*micros);
        assert!(
            m >= asked,
            "--rtt {text}: median round trip {m:?} < {asked:?}"
        );
        assert!(
            m < asked + Duration::from_millis(5),
            "--rtt {text}: median round trip {m:?}"
        );
    }
}

/// 10,000 INCRs written at once come back answered in order; so do 1,000
/// PINGs written one by one, and in far less time than 1,000 one-way
/// delays of 2 ms (the delay line is pipelined, not a delay per chunk in
/// turn).
#[test]
fn pipelined_traffic_keeps_its_order() {
    let redis = Redis::start();
    let proxy = Proxy::start(redis.port, "4ms");
    let mut s = connect(proxy.port);
    let n = 10_000;
    let key = format!("counter-{}", std::process::id());
    let batch = format!("INCR {key}\r\n").repeat(n);
    let mut w = s.try_clone().unwrap();
    let writer = std::thread::spawn(move || w.write_all(batch.as_bytes()).unwrap());
    let mut replies = Vec::new();
    let expected: String = (1..=n).map(|i| format!(":{i}\r\n")).collect();
    while replies.len() < expected.len() {
        let mut buf = [0u8; 65536];
        let got = s.read(&mut buf).unwrap();
        assert!(got > 0, "the proxy closed the connection");
        replies.extend_from_slice(&buf[..got]);
    }
    writer.join().unwrap();
    assert!(
        replies == expected.as_bytes(),
        "replies out of order or altered"
    );

    let pings = 1000;
    let t = Instant::now();
    for _ in 0..pings {
        s.write_all(b"PING\r\n").unwrap();
    }
    let mut pongs = vec![0u8; 7 * pings];
    s.read_exact(&mut pongs).unwrap();
    let took = t.elapsed();
    assert!(pongs == b"+PONG\r\n".repeat(pings), "PONGs altered");
    assert!(
        took < Duration::from_secs(1),
        "{pings} pipelined PINGs took {took:?} (2 ms each way)"
    );
}

/// A 1 MiB value goes in and comes out through the proxy intact.
#[test]
fn large_values_pass_intact() {
    let redis = Redis::start();
    let proxy = Proxy::start(redis.port, "500us");
    let mut s = connect(proxy.port);
    let mut x = 0x9e37_79b9_7f4a_7c15_u64;
    let value: Vec<u8> = (0..1 << 20)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    let mut set = format!("*3\r\n$3\r\nSET\r\n$3\r\nbig\r\n${}\r\n", value.len()).into_bytes();
    set.extend_from_slice(&value);
    set.extend_from_slice(b"\r\n*2\r\n$3\r\nGET\r\n$3\r\nbig\r\n");
    let mut w = s.try_clone().unwrap();
    let writer = std::thread::spawn(move || w.write_all(&set).unwrap());
    let mut expected = format!("+OK\r\n${}\r\n", value.len()).into_bytes();
    expected.extend_from_slice(&value);
    expected.extend_from_slice(b"\r\n");
    let mut got = vec![0u8; expected.len()];
    s.read_exact(&mut got).unwrap();
    writer.join().unwrap();
    assert!(got == expected, "the value came back altered");
}

/// Bad arguments: a clear message and a non-zero status.
#[test]
fn bad_arguments_fail() {
    let run = |args: &[&str]| {
        let out = Command::new(PROXY).args(args).output().unwrap();
        (
            out.status,
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (status, err) = run(&[
        "--listen",
        "127.0.0.1:0",
        "--upstream",
        "127.0.0.1:1",
        "--rtt",
        "5xs",
    ]);
    assert!(
        !status.success() && err.contains("unknown or missing unit"),
        "{err}"
    );
    let (status, err) = run(&[
        "--listen",
        "127.0.0.1:0",
        "--upstream",
        "127.0.0.1:1",
        "--rtt",
        "1.5ms",
    ]);
    assert!(!status.success() && err.contains("whole number"), "{err}");
    let (status, err) = run(&["--listen", "127.0.0.1:0", "--rtt", "1ms"]);
    assert!(!status.success() && err.contains("--upstream"), "{err}");
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let (status, err) = run(&[
        "--listen",
        &format!("127.0.0.1:{port}"),
        "--upstream",
        "127.0.0.1:1",
        "--rtt",
        "0",
    ]);
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(err.contains("--listen") && err.contains("in use"), "{err}");
}

/// SIGTERM ends the proxy with status 0; its open connection ends (the
/// client reads end of file) and its pid file is gone.
#[test]
fn sigterm_ends_it_cleanly() {
    let redis = Redis::start();
    let mut proxy = Proxy::start(redis.port, "100us");
    let mut s = connect(proxy.port);
    common::ping(&mut s);
    let status = proxy.stop();
    assert!(status.success(), "{status}");
    let mut buf = [0u8; 16];
    assert_eq!(s.read(&mut buf).unwrap(), 0);
    assert!(!proxy.pidfile.exists());
}
