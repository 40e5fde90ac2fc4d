//! A file whose server stops answering: a FUSE file system served by a
//! thread of the test, speaking the kernel's protocol over `/dev/fuse`
//! itself (no libfuse), that can be told to read requests and never
//! answer them. Every call on its file that asks the server (`fstat`,
//! `pread`, `pwrite`, `fdatasync`, `close`'s FLUSH) then blocks until the
//! connection is aborted, which is what a hung network or user-space file
//! system does to whoever holds a descriptor of it.
//!
//! Layouts are those of the kernel's `include/uapi/linux/fuse.h` at
//! protocol 7.31, written and read at explicit little-endian offsets (the
//! protocol is the host's byte order; the tests run on little-endian
//! machines, which [`HungFs::mount`] checks).

use std::ffi::CString;
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use rustix::event::{poll, PollFd, PollFlags};

/// The protocol version this server speaks. The kernel accepts any minor
/// of major 7 and adapts to it; 7.31 has every structure used here at its
/// full size.
const MAJOR: u32 = 7;
const MINOR: u32 = 31;
/// The largest WRITE the kernel may send (`fuse_init_out.max_write`).
const MAX_WRITE: u32 = 128 * 1024;
/// The buffer each request is read into. The kernel refuses reads into a
/// buffer that could not hold its largest request (a header, a
/// `fuse_write_in` and `max_write` bytes); this is comfortably more.
const READ_BUFFER: usize = 1024 * 1024 + 4096;

/// Node ids: the root is 1 by the protocol; the file is the only other.
const ROOT_ID: u64 = 1;
const DATA_ID: u64 = 2;
/// The name of the file in the root directory.
const DATA_NAME: &[u8] = b"data";

/// Opcodes (`enum fuse_opcode`).
mod op {
    pub const LOOKUP: u32 = 1;
    pub const FORGET: u32 = 2;
    pub const GETATTR: u32 = 3;
    pub const SETATTR: u32 = 4;
    pub const OPEN: u32 = 14;
    pub const READ: u32 = 15;
    pub const WRITE: u32 = 16;
    pub const STATFS: u32 = 17;
    pub const RELEASE: u32 = 18;
    pub const FSYNC: u32 = 20;
    pub const GETXATTR: u32 = 22;
    pub const LISTXATTR: u32 = 23;
    pub const FLUSH: u32 = 25;
    pub const INIT: u32 = 26;
    pub const ACCESS: u32 = 34;
    pub const INTERRUPT: u32 = 36;
    pub const DESTROY: u32 = 38;
    pub const BATCH_FORGET: u32 = 42;
    pub const STATX: u32 = 52;
}

/// `fuse_init_out.flags`: writes may be larger than a page.
const FUSE_BIG_WRITES: u32 = 1 << 5;
/// `fuse_open_out.open_flags`: no page cache, so every `pread` and
/// `pwrite` is a READ or WRITE the server must answer (a cached page
/// would be served without asking, and the file would not look hung).
const FOPEN_DIRECT_IO: u32 = 1 << 0;
/// `fuse_setattr_in.valid`: the size is to be set.
const FATTR_SIZE: u32 = 1 << 3;

/// Sizes of the structures, from fuse.h; every reply is checked against
/// them, since the kernel rejects a reply of the wrong length.
const IN_HEADER: usize = 40;
const OUT_HEADER: usize = 16;
const ATTR: usize = 88;
const ENTRY_OUT: usize = 40 + ATTR;
const ATTR_OUT: usize = 16 + ATTR;
const INIT_OUT: usize = 64;
const OPEN_OUT: usize = 16;
const WRITE_IN: usize = 40;
const WRITE_OUT: usize = 8;
const STATFS_OUT: usize = 80;

/// A FUSE file system mounted at a temporary directory, served by a
/// thread of the test, holding one regular file `data` (mode 0666, owner
/// root) whose bytes live in memory. Attribute and entry timeouts are 0,
/// so every `fstat` and every lookup of the path asks the server, and
/// the file is opened for direct I/O, so every read and write does too.
///
/// Dropping it aborts the connection (the server's descriptor of
/// `/dev/fuse` is closed, the last one), so every call blocked on the
/// file returns `ECONNABORTED` and every later one `ENOTCONN`; then the
/// mount is detached and the directory removed. Dropping never waits on
/// the file system.
pub struct HungFs {
    dir: tempfile::TempDir,
    state: Arc<State>,
    /// Shut down to stop the server thread (its peer becomes readable).
    stop: UnixStream,
    server: Option<JoinHandle<()>>,
}

/// What the server thread shares with the test.
struct State {
    /// The file's bytes.
    bytes: Mutex<Vec<u8>>,
    /// Set by [`HungFs::hang`]: read requests, never answer them.
    hung: AtomicBool,
    /// Opcodes of the requests read while hung that wanted an answer.
    unanswered: Mutex<Vec<u32>>,
}

impl HungFs {
    /// Mounts a file system holding `data` of `len` zero bytes. Fails with
    /// the kernel's error if it refuses the mount (no `CAP_SYS_ADMIN`, no
    /// fuse module): a test needing a hung file should fail, not pass.
    pub fn mount(len: u64) -> io::Result<HungFs> {
        if cfg!(target_endian = "big") {
            return Err(io::Error::other(
                "HungFs encodes the protocol little-endian",
            ));
        }
        let len = usize::try_from(len).map_err(io::Error::other)?;
        // Non-blocking: the server waits in poll(2), where it also sees the
        // stop signal, and a request withdrawn between the poll and the read
        // (its caller was killed) must not leave it blocked in read(2).
        let dev = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open("/dev/fuse")?;
        let dir = tempfile::Builder::new().prefix("hungfs").tempdir()?;
        mount_fuse(dir.path(), &dev)?;
        let state = Arc::new(State {
            bytes: Mutex::new(vec![0; len]),
            hung: AtomicBool::new(false),
            unanswered: Mutex::new(Vec::new()),
        });
        let (stop, stopped) = UnixStream::pair()?;
        let served = Arc::clone(&state);
        let server = std::thread::Builder::new()
            .name("hungfs".into())
            .spawn(move || serve(dev, &served, &stopped))?;
        Ok(HungFs {
            dir,
            state,
            stop,
            server: Some(server),
        })
    }

    /// `<mountpoint>/data`.
    pub fn path(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// The file opened read-write. Only while the server answers: an open
    /// of a hung file would block the test.
    pub fn open_rw(&self) -> File {
        assert!(
            !self.state.hung.load(Ordering::SeqCst),
            "open_rw after hang() would block on the hung server"
        );
        OpenOptions::new()
            .read(true)
            .write(true)
            .open(self.path())
            .unwrap_or_else(|e| panic!("open {}: {e}", self.path().display()))
    }

    /// From now on the server reads requests and never answers them.
    /// Closing a descriptor of the file then blocks too (the kernel asks
    /// the server to FLUSH), until the `HungFs` is dropped.
    pub fn hang(&self) {
        self.state.hung.store(true, Ordering::SeqCst);
    }

    /// How many requests wanting an answer the server has left unanswered
    /// since [`HungFs::hang`].
    pub fn requests_unanswered(&self) -> u64 {
        self.state.unanswered.lock().unwrap().len() as u64
    }

    /// The names of those requests, in the order read (`"GETATTR"`,
    /// `"READ"`, ...): what the kernel asked on behalf of the blocked calls.
    pub fn unanswered(&self) -> Vec<&'static str> {
        let ops = self.state.unanswered.lock().unwrap();
        ops.iter().map(|&o| opcode_name(o)).collect()
    }

    /// The file's bytes as the server holds them.
    pub fn contents(&self) -> Vec<u8> {
        self.state.bytes.lock().unwrap().clone()
    }
}

impl Drop for HungFs {
    fn drop(&mut self) {
        // The server thread owns the only descriptor of /dev/fuse; when it
        // returns the descriptor is closed and the kernel aborts the
        // connection, failing every request in flight. The thread never
        // blocks anywhere but in poll(2), so the join is prompt.
        let _ = self.stop.shutdown(std::net::Shutdown::Both);
        if let Some(server) = self.server.take() {
            let _ = server.join();
        }
        // Detached: descriptors of the file may still be open (a blocked
        // thread has not yet run to its close), which a plain umount
        // would refuse. The TempDir then removes the empty directory.
        let _ = umount_detach(self.dir.path());
    }
}

/// mount(2) of a FUSE file system served through `dev` at `dir`.
fn mount_fuse(dir: &Path, dev: &File) -> io::Result<()> {
    let uid = rustix::process::geteuid().as_raw();
    let gid = rustix::process::getegid().as_raw();
    let options = format!(
        "fd={},rootmode=40000,user_id={uid},group_id={gid},allow_other",
        dev.as_raw_fd()
    );
    let source = CString::new("hungfs")?;
    let target = CString::new(dir.as_os_str().as_bytes())?;
    let fstype = CString::new("fuse")?;
    let options = CString::new(options)?;
    // SAFETY: the four pointers are NUL-terminated strings that live until
    // the call returns; mount(2) copies what it needs and keeps none.
    let rc = unsafe {
        libc::mount(
            source.as_ptr(),
            target.as_ptr(),
            fstype.as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV,
            options.as_ptr().cast(),
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// umount2(2) of `dir` with `MNT_DETACH`.
fn umount_detach(dir: &Path) -> io::Result<()> {
    let target = CString::new(dir.as_os_str().as_bytes())?;
    // SAFETY: `target` is a NUL-terminated string that lives until the
    // call returns; umount2(2) keeps no pointer to it.
    let rc = unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The server thread: reads requests until the connection goes away or
/// `stop` becomes readable, answering them unless hung.
fn serve(dev: File, state: &State, stop: &UnixStream) {
    let mut buf = vec![0u8; READ_BUFFER];
    while wait_for_request(&dev, stop) {
        let n = match (&dev).read(&mut buf) {
            Ok(n) => n,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                ) =>
            {
                continue
            }
            // ENODEV: the connection was aborted or the mount is gone.
            Err(_) => return,
        };
        let Some(request) = Request::parse(&buf[..n]) else {
            continue;
        };
        if !wants_answer(request.opcode) {
            continue;
        }
        if state.hung.load(Ordering::SeqCst) {
            state.unanswered.lock().unwrap().push(request.opcode);
            continue;
        }
        let reply = encode_reply(request.unique, answer(&request, state));
        // A write fails when the request was interrupted meanwhile (ENOENT)
        // or the connection aborted; neither concerns the next request.
        let _ = (&dev).write(&reply);
    }
}

/// Waits until `dev` has a request (true) or `stop` is readable or the
/// wait fails (false).
fn wait_for_request(dev: &File, stop: &UnixStream) -> bool {
    loop {
        let mut fds = [
            PollFd::new(dev, PollFlags::IN),
            PollFd::new(stop, PollFlags::IN),
        ];
        match poll(&mut fds, None) {
            Ok(_) => {}
            Err(rustix::io::Errno::INTR) => continue,
            Err(_) => return false,
        }
        if !fds[1].revents().is_empty() {
            return false;
        }
        // POLLERR after an abort: the read reports it and ends the loop.
        return !fds[0].revents().is_empty();
    }
}

/// Requests the kernel expects no answer to.
fn wants_answer(opcode: u32) -> bool {
    !matches!(opcode, op::FORGET | op::BATCH_FORGET | op::INTERRUPT)
}

/// A request as read from `/dev/fuse`: `fuse_in_header` and its body.
struct Request<'a> {
    opcode: u32,
    unique: u64,
    nodeid: u64,
    body: &'a [u8],
}

impl<'a> Request<'a> {
    /// `fuse_in_header`: len u32 @0, opcode u32 @4, unique u64 @8,
    /// nodeid u64 @16, uid, gid, pid, padding (u32s @24..40).
    fn parse(buf: &'a [u8]) -> Option<Request<'a>> {
        let len = usize::try_from(le_u32(buf, 0)?).ok()?;
        Some(Request {
            opcode: le_u32(buf, 4)?,
            unique: le_u64(buf, 8)?,
            nodeid: le_u64(buf, 16)?,
            body: buf.get(IN_HEADER..len)?,
        })
    }
}

/// The answer to a request: the body of the reply, or an errno.
type Answer = Result<Vec<u8>, i32>;

/// Answers one request (one wanting an answer, the server not hung).
fn answer(r: &Request, state: &State) -> Answer {
    let len = || state.bytes.lock().unwrap().len() as u64;
    match r.opcode {
        op::INIT => Ok(init_out(r.body)),
        op::LOOKUP => lookup(r, len()),
        op::GETATTR => attr_out(r.nodeid, len()),
        op::SETATTR => setattr(r, state),
        op::OPEN => open(r.nodeid),
        op::READ => read(r.body, state),
        op::WRITE => write(r.body, state),
        op::STATFS => Ok(statfs_out()),
        op::FLUSH | op::RELEASE | op::FSYNC | op::ACCESS | op::DESTROY => Ok(Vec::new()),
        // No extended attributes: ENOSYS also tells the kernel not to ask
        // again. Same for STATX, which the kernel asks (even of a 7.31
        // server) for a statx(2) wanting more than the basic fields, as
        // std's `File::metadata` does (it wants the birth time); after the
        // ENOSYS it asks GETATTR. fstat(2) asks GETATTR from the start.
        op::GETXATTR | op::LISTXATTR | op::STATX => Err(libc::ENOSYS),
        _ => Err(libc::ENOSYS),
    }
}

/// `fuse_out_header` (len u32 @0, error i32 @4, unique u64 @8) and body.
fn encode_reply(unique: u64, answer: Answer) -> Vec<u8> {
    let (error, body) = match answer {
        Ok(body) => (0, body),
        Err(errno) => (-errno, Vec::new()),
    };
    let mut out = Enc::with_capacity(OUT_HEADER + body.len());
    out.u32((OUT_HEADER + body.len()) as u32)
        .i32(error)
        .u64(unique);
    out.0.extend_from_slice(&body);
    out.0
}

/// `fuse_init_out` for protocol 7.31. The kernel's `fuse_init_in` starts
/// major u32 @0, minor u32 @4, max_readahead u32 @8, flags u32 @12.
fn init_out(body: &[u8]) -> Vec<u8> {
    let max_readahead = le_u32(body, 8).unwrap_or(0);
    let mut out = Enc::with_capacity(INIT_OUT);
    out.u32(MAJOR)
        .u32(MINOR)
        .u32(max_readahead)
        .u32(FUSE_BIG_WRITES)
        .u16(16) // max_background
        .u16(12) // congestion_threshold
        .u32(MAX_WRITE)
        .u32(1) // time_gran: nanoseconds
        .u16(0) // max_pages: the default (FUSE_MAX_PAGES not set)
        .u16(0) // map_alignment
        .zeros(32); // unused[8]
    out.finish(INIT_OUT)
}

/// LOOKUP of a NUL-terminated name in the root: only `data` exists.
fn lookup(r: &Request, len: u64) -> Answer {
    let name = r.body.split(|&b| b == 0).next().unwrap_or_default();
    if r.nodeid != ROOT_ID || name != DATA_NAME {
        return Err(libc::ENOENT);
    }
    // fuse_entry_out: nodeid, generation, entry_valid, attr_valid (u64s),
    // entry_valid_nsec, attr_valid_nsec (u32s), fuse_attr. Timeouts 0:
    // the kernel asks again at every use.
    let mut out = Enc::with_capacity(ENTRY_OUT);
    out.u64(DATA_ID).u64(0).u64(0).u64(0).u32(0).u32(0);
    attr(&mut out, DATA_ID, len);
    Ok(out.finish(ENTRY_OUT))
}

/// `fuse_attr_out`: attr_valid u64, attr_valid_nsec u32, dummy u32,
/// fuse_attr; a timeout of 0, so the next `fstat` asks again.
fn attr_out(nodeid: u64, len: u64) -> Answer {
    if nodeid != ROOT_ID && nodeid != DATA_ID {
        return Err(libc::ENOENT);
    }
    let mut out = Enc::with_capacity(ATTR_OUT);
    out.u64(0).u32(0).u32(0);
    attr(&mut out, nodeid, len);
    Ok(out.finish(ATTR_OUT))
}

/// `fuse_attr` of the root (a directory 0755) or of `data` (a regular
/// file 0666 of `len` bytes), both owned by root.
fn attr(out: &mut Enc, nodeid: u64, len: u64) {
    let (mode, nlink, size) = if nodeid == ROOT_ID {
        (libc::S_IFDIR | 0o755, 2, 0)
    } else {
        (libc::S_IFREG | 0o666, 1, len)
    };
    out.u64(nodeid) // ino
        .u64(size)
        .u64(size.div_ceil(512)) // blocks
        .u64(0) // atime
        .u64(0) // mtime
        .u64(0) // ctime
        .u32(0) // atimensec
        .u32(0) // mtimensec
        .u32(0) // ctimensec
        .u32(mode)
        .u32(nlink)
        .u32(0) // uid
        .u32(0) // gid
        .u32(0) // rdev
        .u32(4096) // blksize
        .u32(0); // flags
}

/// SETATTR: only a new size (truncate, `set_len`) changes anything.
/// `fuse_setattr_in`: valid u32 @0, padding @4, fh u64 @8, size u64 @16.
fn setattr(r: &Request, state: &State) -> Answer {
    if r.nodeid != DATA_ID {
        return attr_out(r.nodeid, 0);
    }
    let valid = le_u32(r.body, 0).ok_or(libc::EINVAL)?;
    let mut bytes = state.bytes.lock().unwrap();
    if valid & FATTR_SIZE != 0 {
        let size = le_u64(r.body, 16).ok_or(libc::EINVAL)?;
        bytes.resize(usize::try_from(size).map_err(|_| libc::EFBIG)?, 0);
    }
    attr_out(DATA_ID, bytes.len() as u64)
}

/// OPEN of `data`: `fuse_open_out` (fh u64, open_flags u32, padding u32)
/// with direct I/O.
fn open(nodeid: u64) -> Answer {
    if nodeid != DATA_ID {
        return Err(libc::EISDIR);
    }
    let mut out = Enc::with_capacity(OPEN_OUT);
    out.u64(0).u32(FOPEN_DIRECT_IO).u32(0);
    Ok(out.finish(OPEN_OUT))
}

/// READ: `fuse_read_in` has offset u64 @8, size u32 @16; the reply is
/// the bytes, short at the end of the file.
fn read(body: &[u8], state: &State) -> Answer {
    let offset = le_u64(body, 8).ok_or(libc::EINVAL)?;
    let size = le_u32(body, 16).ok_or(libc::EINVAL)?;
    let bytes = state.bytes.lock().unwrap();
    let start = usize::try_from(offset)
        .unwrap_or(usize::MAX)
        .min(bytes.len());
    let end = start.saturating_add(size as usize).min(bytes.len());
    Ok(bytes[start..end].to_vec())
}

/// WRITE: `fuse_write_in` has offset u64 @8, size u32 @16, and the data
/// follows it; the file grows as needed. `fuse_write_out`: size u32,
/// padding u32.
fn write(body: &[u8], state: &State) -> Answer {
    let offset = le_u64(body, 8).ok_or(libc::EINVAL)?;
    let size = le_u32(body, 16).ok_or(libc::EINVAL)?;
    let data = body
        .get(WRITE_IN..WRITE_IN + size as usize)
        .ok_or(libc::EINVAL)?;
    let start = usize::try_from(offset).map_err(|_| libc::EFBIG)?;
    let mut bytes = state.bytes.lock().unwrap();
    if bytes.len() < start + data.len() {
        bytes.resize(start + data.len(), 0);
    }
    bytes[start..start + data.len()].copy_from_slice(data);
    let mut out = Enc::with_capacity(WRITE_OUT);
    out.u32(size).u32(0);
    Ok(out.finish(WRITE_OUT))
}

/// `fuse_statfs_out`: blocks, bfree, bavail, files, ffree (u64s), bsize,
/// namelen, frsize, padding, spare[6] (u32s).
fn statfs_out() -> Vec<u8> {
    let mut out = Enc::with_capacity(STATFS_OUT);
    out.u64(1 << 20).u64(1 << 19).u64(1 << 19).u64(2).u64(0);
    out.u32(4096).u32(255).u32(4096).u32(0).zeros(24);
    out.finish(STATFS_OUT)
}

/// The name of an opcode, for [`HungFs::unanswered`].
fn opcode_name(opcode: u32) -> &'static str {
    match opcode {
        op::LOOKUP => "LOOKUP",
        op::GETATTR => "GETATTR",
        op::SETATTR => "SETATTR",
        op::OPEN => "OPEN",
        op::READ => "READ",
        op::WRITE => "WRITE",
        op::STATFS => "STATFS",
        op::RELEASE => "RELEASE",
        op::FSYNC => "FSYNC",
        op::GETXATTR => "GETXATTR",
        op::LISTXATTR => "LISTXATTR",
        op::FLUSH => "FLUSH",
        op::INIT => "INIT",
        op::ACCESS => "ACCESS",
        op::DESTROY => "DESTROY",
        op::STATX => "STATX",
        _ => "OTHER",
    }
}

/// A little-endian encoder of the protocol's structures.
struct Enc(Vec<u8>);

impl Enc {
    fn with_capacity(n: usize) -> Enc {
        Enc(Vec::with_capacity(n))
    }
    fn u16(&mut self, v: u16) -> &mut Enc {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn u32(&mut self, v: u32) -> &mut Enc {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn i32(&mut self, v: i32) -> &mut Enc {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn u64(&mut self, v: u64) -> &mut Enc {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn zeros(&mut self, n: usize) -> &mut Enc {
        self.0.resize(self.0.len() + n, 0);
        self
    }
    /// The bytes, which must be the structure's size in fuse.h.
    fn finish(self, size: usize) -> Vec<u8> {
        assert_eq!(self.0.len(), size, "a FUSE structure of the wrong size");
        self.0
    }
}

fn le_u32(buf: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(buf.get(at..at + 4)?.try_into().ok()?))
}

fn le_u64(buf: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(buf.get(at..at + 8)?.try_into().ok()?))
}
