//! Helpers for the server's tests: a daemon on a temporary socket in a
//! thread of the test, clients speaking the protocol over real sockets,
//! regions with real descriptors, child processes that are killed when a
//! test ends. Every wait is bounded.
#![allow(dead_code)]

pub mod users;

use std::fs::File;
use std::os::fd::AsFd;
use std::os::unix::fs::FileExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::Child;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use pagepilot_daemon::server::MAX_DIRTY_BYTES;
use pagepilot_daemon::server::{Server, ServerError, ServerOptions, StopHandle};
use pagepilot_daemon::Config;
use pagepilot_protocol::{
    ClientId, DirtyMap, ErrorCode, ErrorReply, Message, RegionFiles, RegionId, RegisterRegion,
    StatusReply, DIRTY_MAGIC,
};
use pagepilot_transport::Connection;
use rustix::fs::{memfd_create, MemfdFlags};

pub mod fuse;

/// The longest any test waits for a message.
pub const WAIT: Duration = Duration::from_secs(10);
/// Bytes of a page.
pub const PAGE: u64 = 4096;

/// A daemon serving in a thread of the test; stopped when dropped.
pub struct Daemon {
    pub socket: PathBuf,
    pub dir: tempfile::TempDir,
    stop: StopHandle,
    thread: Option<JoinHandle<Result<(), ServerError>>>,
}

impl Daemon {
    /// A daemon configured by the TOML `config`, default options.
    pub fn start(config: &str) -> Daemon {
        Daemon::start_with(config, |_| {})
    }

    /// A daemon with options changed by `f`. Its log lines are left out
    /// unless `PP_DAEMON_LOG` is set.
    pub fn start_with(config: &str, f: impl FnOnce(&mut ServerOptions)) -> Daemon {
        let dir = tempfile::tempdir().unwrap();
        // Other users' processes connect too.
        std::fs::set_permissions(
            dir.path(),
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .unwrap();
        let socket = dir.path().join("daemon.sock");
        let mut options = ServerOptions::new(&socket);
        options.quiet = std::env::var_os("PP_DAEMON_LOG").is_none();
        f(&mut options);
        let server = Server::bind(Config::parse(config).unwrap(), options).unwrap();
        let stop = server.stop_handle();
        let thread = Some(std::thread::spawn(move || server.run()));
        Daemon {
            socket,
            dir,
            stop,
            thread,
        }
    }

    /// A client that said Hello and was welcomed.
    pub fn client(&self) -> Client {
        let mut c = Client {
            conn: Connection::connect(&self.socket).unwrap(),
            id: ClientId(0),
            events: Vec::new(),
        };
        match c.request(&hello()) {
            Message::Welcome { client, .. } => c.id = client,
            other => panic!("expected Welcome, got {other:?}"),
        }
        c
    }

    /// A client of user `uid` (its primary group the same number) that
    /// said Hello and was welcomed: connected by a child process of that
    /// user, spoken through by the test.
    pub fn client_as(&self, uid: u32) -> Client {
        let stream = users::connect_as(&self.socket, self.dir.path(), uid, uid);
        let mut c = Client {
            conn: Connection::new(stream, pagepilot_protocol::Peer::Daemon),
            id: ClientId(0),
            events: Vec::new(),
        };
        match c.request(&hello()) {
            Message::Welcome { client, .. } => c.id = client,
            other => panic!("expected Welcome, got {other:?}"),
        }
        c
    }

    /// A raw connection (no Hello), reads bounded by [`WAIT`].
    pub fn raw(&self) -> UnixStream {
        let s = UnixStream::connect(&self.socket).unwrap();
        s.set_read_timeout(Some(WAIT)).unwrap();
        s
    }

    /// The daemon's status, asked by a client of its own.
    pub fn status(&self) -> StatusReply {
        let mut c = self.client();
        let Message::StatusReply(s) = c.request(&Message::Status) else {
            panic!("no status")
        };
        c.conn.send(&Message::Goodbye, &[]).unwrap();
        s
    }

    /// Waits until `f(status)` holds.
    pub fn until(&self, what: &str, f: impl Fn(&StatusReply) -> bool) -> StatusReply {
        let start = Instant::now();
        loop {
            let s = self.status();
            if f(&s) {
                return s;
            }
            assert!(
                start.elapsed() < WAIT,
                "timed out waiting for {what}: {s:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Stops the daemon; panics if it failed or panicked.
    pub fn stop(mut self) {
        self.stop_and_join().expect("the daemon failed");
    }

    fn stop_and_join(&mut self) -> Result<(), String> {
        self.stop.stop();
        match self.thread.take().map(|t| t.join()) {
            Some(Ok(Ok(()))) | None => Ok(()),
            Some(Ok(Err(e))) => Err(e.to_string()),
            Some(Err(_)) => Err("the daemon panicked".into()),
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let result = self.stop_and_join();
        if !std::thread::panicking() {
            result.expect("the daemon failed");
        }
    }
}

/// The Hello of a client speaking version 1.
pub fn hello() -> Message {
    Message::Hello {
        versions: vec![1],
        pid: Some(std::process::id()),
    }
}

/// A client over a real socket.
pub struct Client {
    pub conn: Connection,
    pub id: ClientId,
    /// Events received while waiting for a reply.
    pub events: Vec<Message>,
}

fn is_event(m: &Message) -> bool {
    matches!(
        m,
        Message::ReclaimOrder { .. } | Message::Forced { .. } | Message::Settled { .. }
    )
}

impl Client {
    /// A client of this process, connected to the daemon at `socket`,
    /// that said Hello and was welcomed.
    pub fn joined(socket: &Path) -> Client {
        let mut c = Client {
            conn: Connection::connect(socket).unwrap(),
            id: ClientId(0),
            events: Vec::new(),
        };
        assert!(matches!(c.request(&hello()), Message::Welcome { .. }));
        c
    }

    /// Sends `m` and returns its reply (events meanwhile are kept).
    pub fn request(&mut self, m: &Message) -> Message {
        self.conn.send(m, &[]).unwrap();
        self.reply()
    }

    /// Sends `m` with descriptors and returns its reply.
    pub fn request_with(&mut self, m: &Message, fds: &[&File]) -> Message {
        let fds: Vec<_> = fds.iter().map(|f| f.as_fd()).collect();
        self.conn.send(m, &fds).unwrap();
        self.reply()
    }

    /// The next message that is not an event.
    pub fn reply(&mut self) -> Message {
        loop {
            let m = self.recv();
            if !is_event(&m) {
                return m;
            }
            self.events.push(m);
        }
    }

    /// The next message, within [`WAIT`].
    pub fn recv(&mut self) -> Message {
        self.recv_within(WAIT).expect("no message in time")
    }

    /// The next message within `d`, if any.
    pub fn recv_within(&mut self, d: Duration) -> Option<Message> {
        self.conn
            .receive_within(Some(d))
            .unwrap()
            .map(|r| r.message)
    }

    /// The next event (kept or arriving within [`WAIT`]).
    pub fn event(&mut self) -> Message {
        if !self.events.is_empty() {
            return self.events.remove(0);
        }
        let m = self.recv();
        assert!(is_event(&m), "expected an event, got {m:?}");
        m
    }

    /// Registers a region without descriptors.
    pub fn register(&mut self, region: u32, min: u64, budget: u64) -> Message {
        self.request(&register(region, min, budget, RegionFiles::default()))
    }
}

/// A registration.
pub fn register(region: u32, min: u64, budget: u64, files: RegionFiles) -> Message {
    Message::RegisterRegion(RegisterRegion {
        region: RegionId(region),
        min_frames: min,
        budget_frames: budget,
        files,
        ..RegisterRegion::default()
    })
}

/// Whether a reply registered the region.
pub fn registered(m: &Message) -> bool {
    matches!(m, Message::Registered { .. })
}

/// The error in a reply.
pub fn error(m: &Message) -> &ErrorReply {
    match m {
        Message::Error(e) => e,
        other => panic!("expected an Error, got {other:?}"),
    }
}

/// The error code of a reply.
pub fn code(m: &Message) -> ErrorCode {
    error(m).code
}

/// Waits until the peer closes `s` (reads what comes first); panics after
/// [`WAIT`].
pub fn closed_by_peer(s: &mut UnixStream) -> Vec<u8> {
    s.set_read_timeout(Some(WAIT)).unwrap();
    let mut all = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match std::io::Read::read(s, &mut buf) {
            Ok(0) => return all,
            Ok(n) => all.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return all,
            Err(e) => panic!("the daemon did not close the connection: {e}"),
        }
    }
}

/// The three files of a region: its memory (a memfd), its backing file and
/// its dirty map (a memfd in [`DirtyMap`] layout).
pub struct RegionFilesOnDisk {
    pub memory: File,
    pub backing: File,
    pub dirty: File,
    pub pages: u64,
}

impl RegionFilesOnDisk {
    /// A memfd of `pages` pages (all holes), a dirty map of them all clean,
    /// and the backing file at `path` (opened read-write).
    pub fn new(pages: u64, path: &Path) -> RegionFilesOnDisk {
        RegionFilesOnDisk {
            memory: sized_memfd("region", pages * PAGE),
            dirty: clean_dirty_map(pages),
            backing: open_rw(path),
            pages,
        }
    }

    /// As [`RegionFilesOnDisk::new`], over a backing file already open.
    pub fn over(pages: u64, backing: &File) -> RegionFilesOnDisk {
        RegionFilesOnDisk {
            memory: sized_memfd("region", pages * PAGE),
            dirty: clean_dirty_map(pages),
            backing: backing.try_clone().unwrap(),
            pages,
        }
    }

    /// The largest region a client may register: 32 TiB of memory, all
    /// holes but `data_pages` (each filled with its own number), and a
    /// dirty map of 1 GiB, the most accepted, with every bit set; over the
    /// backing file at `path`.
    pub fn maximal(path: &Path, data_pages: &[u64]) -> RegionFilesOnDisk {
        let pages = (MAX_DIRTY_BYTES - 16) * 8;
        let memory = sized_memfd("region", pages * PAGE);
        for &p in data_pages {
            fill(&memory, p, p as u8);
        }
        let dirty = sized_memfd("dirty", MAX_DIRTY_BYTES);
        let mut header = DIRTY_MAGIC.to_le_bytes().to_vec();
        header.extend(pages.to_le_bytes());
        dirty.write_all_at(&header, 0).unwrap();
        let ones = vec![0xFFu8; 1 << 20];
        let mut at = 16;
        while at < MAX_DIRTY_BYTES {
            let n = (MAX_DIRTY_BYTES - at).min(ones.len() as u64) as usize;
            dirty.write_all_at(&ones[..n], at).unwrap();
            at += n as u64;
        }
        RegionFilesOnDisk {
            memory,
            backing: open_rw(path),
            dirty,
            pages,
        }
    }

    /// Writes `byte` over page `page` of the memory.
    pub fn fill(&self, page: u64, byte: u8) {
        fill(&self.memory, page, byte);
    }

    /// Marks `page` dirty, as the client's pager does in the shared map.
    pub fn mark_dirty(&self, page: u64) {
        mark_dirty(&self.dirty, page);
    }

    /// The registration carrying all three.
    pub fn register(&self, region: u32, min: u64, budget: u64) -> Message {
        let files = RegionFiles {
            memory: true,
            backing: true,
            dirty: true,
        };
        register(region, min, budget, files)
    }

    /// The descriptors, in the protocol's order.
    pub fn fds(&self) -> [&File; 3] {
        [&self.memory, &self.backing, &self.dirty]
    }
}

/// Writes `byte` over page `page` of a region's memory.
pub fn fill(memory: &File, page: u64, byte: u8) {
    memory
        .write_all_at(&vec![byte; PAGE as usize], page * PAGE)
        .unwrap();
}

/// Marks `page` dirty in a dirty map, as the client's pager does.
pub fn mark_dirty(dirty: &File, page: u64) {
    let at = 16 + (page / 64) * 8;
    let mut word = [0u8; 8];
    dirty.read_exact_at(&mut word, at).unwrap();
    let w = u64::from_le_bytes(word) | 1 << (page % 64);
    dirty.write_all_at(&w.to_le_bytes(), at).unwrap();
}

/// The file at `path`, opened read-write.
fn open_rw(path: &Path) -> File {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap()
}

/// A memfd of `len` bytes, all holes.
pub fn sized_memfd(name: &str, len: u64) -> File {
    let f = File::from(memfd_create(name, MemfdFlags::CLOEXEC).unwrap());
    f.set_len(len).unwrap();
    f
}

/// A dirty map of `pages` pages, all clean, in a memfd.
pub fn clean_dirty_map(pages: u64) -> File {
    let dirty = File::from(memfd_create("dirty", MemfdFlags::CLOEXEC).unwrap());
    let words: Vec<AtomicU64> = (0..DirtyMap::bytes_for(pages) / 8)
        .map(|_| AtomicU64::new(0))
        .collect();
    DirtyMap::init(&words, pages).unwrap();
    let bytes: Vec<u8> = words
        .iter()
        .flat_map(|w| w.load(Ordering::Relaxed).to_le_bytes())
        .collect();
    dirty.write_all_at(&bytes, 0).unwrap();
    dirty
}

/// The frames in bytes a daemon sent.
pub fn frames(mut bytes: &[u8]) -> Vec<Message> {
    let mut out = Vec::new();
    while bytes.len() >= 12 {
        let len = 12 + u32::from_le_bytes(bytes[8..12].try_into().unwrap()) as usize;
        let decoded =
            pagepilot_protocol::decode_from(pagepilot_protocol::Peer::Daemon, &bytes[..len]);
        out.push(decoded.unwrap().message);
        bytes = &bytes[len..];
    }
    out
}

/// A backing file of `len` bytes of `byte` in `dir`.
pub fn backing_file(dir: &Path, name: &str, len: u64, byte: u8) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, vec![byte; len as usize]).unwrap();
    path
}

/// A child process killed (SIGKILL) and reaped when dropped.
pub struct ChildGuard(pub Child);

impl ChildGuard {
    /// Waits for the child to exit, at most [`WAIT`].
    pub fn wait(&mut self) -> std::process::ExitStatus {
        let start = Instant::now();
        loop {
            if let Some(status) = self.0.try_wait().unwrap() {
                return status;
            }
            assert!(start.elapsed() < WAIT, "the child did not exit");
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// This test binary run again as a child, running only the test `role`
/// with `env` set (the role's test does nothing without `PP_CHILD`).
pub fn spawn_role(role: &str, env: &[(&str, &str)]) -> ChildGuard {
    ChildGuard(role_command(role, env).spawn().unwrap())
}

/// As [`spawn_role`], the child running as user `uid` and group `gid`
/// with no supplementary groups.
pub fn spawn_role_as(role: &str, uid: u32, gid: u32, env: &[(&str, &str)]) -> ChildGuard {
    use std::os::unix::process::CommandExt;
    ChildGuard(role_command(role, env).uid(uid).gid(gid).spawn().unwrap())
}

fn role_command(role: &str, env: &[(&str, &str)]) -> std::process::Command {
    let mut cmd = std::process::Command::new(std::env::current_exe().unwrap());
    cmd.args([role, "--exact", "--nocapture", "--test-threads=1"])
        .env("PP_CHILD", "1")
        .stdout(std::process::Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd
}

/// Whether this process is a child started by [`spawn_role`].
pub fn is_child() -> bool {
    std::env::var_os("PP_CHILD").is_some()
}
