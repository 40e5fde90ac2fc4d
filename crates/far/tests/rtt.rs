//! A Redis Cluster at network distance (scripts/redis-cluster --rtt): it
//! works through the delaying proxies its nodes announce (redirects and
//! replication included), and a PING round trip through one takes at
//! least the asked time.

mod common;

use common::Cluster;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

const RTT: Duration = Duration::from_micros(500);

/// A plain connection (no cluster support) to `host:port`.
fn plain(host: &str, port: u16) -> redis::Connection {
    redis::Client::open(format!("redis://{host}:{port}"))
        .unwrap()
        .get_connection_with_timeout(Duration::from_secs(10))
        .unwrap()
}

/// The median round trip of PINGs on a raw connection to `host:port`,
/// `rounds` medians of `per_round` each, their median.
fn median_ping(host: &str, port: u16, rounds: usize, per_round: usize) -> Duration {
    let mut s = TcpStream::connect((host, port)).unwrap();
    s.set_nodelay(true).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut medians: Vec<Duration> = (0..rounds)
        .map(|_| {
            let mut times: Vec<Duration> = (0..per_round)
                .map(|_| {
                    let t = Instant::now();
                    s.write_all(b"PING\r\n").unwrap();
                    let mut reply = [0u8; 7];
                    s.read_exact(&mut reply).unwrap();
                    assert_eq!(&reply, b"+PONG\r\n");
                    t.elapsed()
                })
                .collect();
            times.sort();
            times[per_round / 2]
        })
        .collect();
    medians.sort();
    medians[rounds / 2]
}

#[test]
fn a_cluster_at_500us_works_through_its_proxies() {
    let cluster = Cluster::start_with_rtt(1, RTT);
    let seed_ports: Vec<u16> = cluster
        .seeds
        .iter()
        .map(|s| s.rsplit(':').next().unwrap().parse().unwrap())
        .collect();

    // A key on each primary (every key of the test, if the slots fall so).
    let mut keys: Vec<(String, u16)> = Vec::new();
    for i in 0.. {
        let key = format!("rtt-{}-{i}", std::process::id());
        let primary = cluster.primary_of(&key);
        if !keys.iter().any(|(_, p)| *p == primary) {
            keys.push((key, primary));
        }
        if keys.len() == 3 {
            break;
        }
        assert!(i < 1000, "no key on each of three primaries");
    }

    // The cluster client learns the announced addresses (CLUSTER SLOTS):
    // the proxies on 127.0.0.1, the nodes themselves being on 127.0.0.2.
    let urls: Vec<String> = cluster
        .seeds
        .iter()
        .map(|s| format!("redis://{s}"))
        .collect();
    let mut conn = redis::cluster::ClusterClient::new(urls)
        .unwrap()
        .get_connection()
        .unwrap();
    for (key, _) in &keys {
        let () = redis::cmd("SET")
            .arg(key)
            .arg(key.as_str())
            .query(&mut conn)
            .unwrap();
        let got: String = redis::cmd("GET").arg(key).query(&mut conn).unwrap();
        assert_eq!(&got, key);
    }

    // A node redirects a plain client to the proxy of the key's primary.
    let (key, primary) = keys.iter().find(|(_, p)| *p != seed_ports[0]).unwrap();
    let err = redis::cmd("GET")
        .arg(key)
        .query::<String>(&mut plain("127.0.0.1", seed_ports[0]))
        .unwrap_err();
    assert_eq!(
        err.redirect_node().map(|(addr, _)| addr.to_string()),
        Some(format!("127.0.0.1:{primary}")),
        "{err}"
    );

    // Replicas follow their primaries through the proxies: WAIT sees them.
    for (key, primary) in &keys {
        let mut c = plain("127.0.0.1", *primary);
        let () = redis::cmd("SET")
            .arg(key)
            .arg("again")
            .query(&mut c)
            .unwrap();
        let acked: i64 = redis::cmd("WAIT").arg(1).arg(10_000).query(&mut c).unwrap();
        assert_eq!(acked, 1, "the replica of {primary} did not acknowledge");
    }

    // The distance: a PING through a proxy against one to its node.
    let port = seed_ports[0];
    let direct = median_ping("127.0.0.2", port, 5, 200);
    let proxied = median_ping("127.0.0.1", port, 5, 200);
    println!(
        "PING round trip, median: direct {:.1} us, through the --rtt {} us proxy {:.1} us (added {:.1} us)",
        direct.as_secs_f64() * 1e6,
        RTT.as_micros(),
        proxied.as_secs_f64() * 1e6,
        proxied.saturating_sub(direct).as_secs_f64() * 1e6
    );
    assert!(proxied >= RTT, "median PING {proxied:?} through the proxy");
    assert!(
        proxied < Duration::from_millis(5),
        "median PING {proxied:?} through the proxy"
    );
}
