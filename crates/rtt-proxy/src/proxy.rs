//! The listener: each connection it accepts gets one to the upstream and
//! a delayed forwarder each way (crate::delay), on a thread each.

use std::collections::HashMap;
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread;
use std::time::Duration;

use crate::delay::forward;

/// Why the proxy could not start.
#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    /// The upstream address did not resolve.
    #[error("--upstream {addr}: {source}")]
    Resolve {
        /// As given.
        addr: String,
        /// What resolving said.
        source: std::io::Error,
    },
    /// The listening address could not be bound.
    #[error("--listen {addr}: {source}")]
    Bind {
        /// As given.
        addr: String,
        /// What bind said.
        source: std::io::Error,
    },
}

/// The open connections, by number: both sockets of each, to shut down.
#[derive(Default)]
struct Open {
    next: AtomicU64,
    conns: Mutex<HashMap<u64, [TcpStream; 2]>>,
}

/// A connection's place in `Open`, given up when its last thread ends.
struct Entry {
    id: u64,
    open: Arc<Open>,
}

impl Drop for Entry {
    fn drop(&mut self) {
        let mut conns = self
            .open
            .conns
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        conns.remove(&self.id);
    }
}

/// A bound proxy: `listen` forwarded to `upstream`, `one_way` added to
/// each direction.
pub struct Proxy {
    listener: TcpListener,
    upstream: SocketAddr,
    one_way: Duration,
    open: Arc<Open>,
}

impl Proxy {
    /// Resolves `upstream` and binds `listen`.
    pub fn bind(listen: &str, upstream: &str, one_way: Duration) -> Result<Proxy, ProxyError> {
        let resolve = |source| ProxyError::Resolve {
            addr: upstream.into(),
            source,
        };
        let upstream = upstream
            .to_socket_addrs()
            .map_err(resolve)?
            .next()
            .ok_or_else(|| resolve(std::io::ErrorKind::NotFound.into()))?;
        let listener = TcpListener::bind(listen).map_err(|source| ProxyError::Bind {
            addr: listen.into(),
            source,
        })?;
        Ok(Proxy {
            listener,
            upstream,
            one_way,
            open: Arc::default(),
        })
    }

    /// Accepts connections for ever (a thread of their own serves each).
    pub fn serve(&self) {
        for client in self.listener.incoming() {
            let Ok(client) = client else { continue };
            let (upstream, one_way, open) = (self.upstream, self.one_way, self.open.clone());
            let spawned = thread::Builder::new()
                .name("conn".into())
                .spawn(move || connect(client, upstream, one_way, open));
            if let Err(e) = spawned {
                eprintln!("rtt-proxy: no thread for a connection: {e}");
            }
        }
    }

    /// Shuts down both sockets of every open connection (each peer sees
    /// the connection end); what was still in a delay line is dropped.
    pub fn close_all(&self) {
        let conns = self
            .open
            .conns
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        for socket in conns.values().flatten() {
            let _ = socket.shutdown(Shutdown::Both);
        }
    }
}

/// Connects `client` to the upstream and forwards both ways (one thread
/// each) until both directions end.
fn connect(client: TcpStream, upstream: SocketAddr, one_way: Duration, open: Arc<Open>) {
    let server = match TcpStream::connect(upstream) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("rtt-proxy: connecting to {upstream}: {e}");
            return;
        }
    };
    let clones = (|| {
        client.set_nodelay(true)?;
        server.set_nodelay(true)?;
        Ok::<_, std::io::Error>((
            [client.try_clone()?, server.try_clone()?],
            [client.try_clone()?, server.try_clone()?],
        ))
    })();
    let (registered, [client_back, server_back]) = match clones {
        Ok(c) => c,
        Err(e) => {
            eprintln!("rtt-proxy: setting up a connection: {e}");
            return;
        }
    };
    let id = open.next.fetch_add(1, Ordering::Relaxed);
    open.conns
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .insert(id, registered);
    let _entry = Entry { id, open };
    let back = thread::Builder::new()
        .name("up".into())
        .spawn(move || forward(&server_back, &client_back, one_way));
    match back {
        Ok(back) => {
            forward(&client, &server, one_way);
            let _ = back.join();
        }
        Err(e) => {
            eprintln!("rtt-proxy: no thread for a connection: {e}");
            let _ = client.shutdown(Shutdown::Both);
            let _ = server.shutdown(Shutdown::Both);
        }
    }
}
