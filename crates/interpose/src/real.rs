//! The C library's own functions, found past this library in the lookup
//! order (`dlsym(RTLD_NEXT)`), resolved once on first use.

use std::ffi::{c_char, c_int, c_void};
use std::sync::atomic::{AtomicPtr, Ordering::Relaxed};

use libc::{off_t, size_t, ssize_t};

/// A lazily resolved symbol of the next library.
struct Next {
    name: &'static [u8],
    ptr: AtomicPtr<c_void>,
}

impl Next {
    const fn new(name: &'static [u8]) -> Next {
        Next {
            name,
            ptr: AtomicPtr::new(std::ptr::null_mut()),
        }
    }

    fn get(&self) -> *mut c_void {
        let p = self.ptr.load(Relaxed);
        if !p.is_null() {
            return p;
        }
        // SAFETY: `name` is NUL-terminated (every `Next` below is built
        // from a b"...\0" literal); RTLD_NEXT is a valid pseudo-handle.
        let p = unsafe { libc::dlsym(libc::RTLD_NEXT, self.name.as_ptr().cast()) };
        assert!(
            !p.is_null(),
            "pagepilot-run: no next definition of a libc function"
        );
        self.ptr.store(p, Relaxed);
        p
    }
}

macro_rules! next_fns {
    ($( $name:ident ( $($arg:ident : $ty:ty),* ) -> $ret:ty; )*) => {
        $(
            /// The C library's function of this name.
            ///
            /// # Safety
            /// As the C function's own contract.
            pub unsafe fn $name($($arg: $ty),*) -> $ret {
                static NEXT: Next = Next::new(concat!(stringify!($name), "\0").as_bytes());
                // SAFETY: the symbol named `$name` in the C library has this
                // C signature (the prototypes of <sys/mman.h>, <unistd.h>,
                // <fcntl.h>, <sys/uio.h>).
                let f: unsafe extern "C" fn($($ty),*) -> $ret = unsafe { std::mem::transmute(NEXT.get()) };
                // SAFETY: forwarded from the caller.
                unsafe { f($($arg),*) }
            }
        )*
    };
}

next_fns! {
    mmap(addr: *mut c_void, len: size_t, prot: c_int, flags: c_int, fd: c_int, off: off_t) -> *mut c_void;
    munmap(addr: *mut c_void, len: size_t) -> c_int;
    mremap(old: *mut c_void, old_len: size_t, new_len: size_t, flags: c_int, new_addr: *mut c_void) -> *mut c_void;
    msync(addr: *mut c_void, len: size_t, flags: c_int) -> c_int;
    madvise(addr: *mut c_void, len: size_t, advice: c_int) -> c_int;
    mprotect(addr: *mut c_void, len: size_t, prot: c_int) -> c_int;
    read(fd: c_int, buf: *mut c_void, n: size_t) -> ssize_t;
    write(fd: c_int, buf: *const c_void, n: size_t) -> ssize_t;
    pread64(fd: c_int, buf: *mut c_void, n: size_t, off: off_t) -> ssize_t;
    pwrite64(fd: c_int, buf: *const c_void, n: size_t, off: off_t) -> ssize_t;
    readv(fd: c_int, iov: *const libc::iovec, n: c_int) -> ssize_t;
    writev(fd: c_int, iov: *const libc::iovec, n: c_int) -> ssize_t;
    preadv64(fd: c_int, iov: *const libc::iovec, n: c_int, off: off_t) -> ssize_t;
    pwritev64(fd: c_int, iov: *const libc::iovec, n: c_int, off: off_t) -> ssize_t;
    ftruncate64(fd: c_int, len: off_t) -> c_int;
    fallocate64(fd: c_int, mode: c_int, off: off_t, len: off_t) -> c_int;
    fsync(fd: c_int) -> c_int;
    fdatasync(fd: c_int) -> c_int;
    close(fd: c_int) -> c_int;
    dup2(old: c_int, new: c_int) -> c_int;
    dup3(old: c_int, new: c_int, flags: c_int) -> c_int;
    execve(path: *const c_char, argv: *const *const c_char, envp: *const *const c_char) -> c_int;
    execv(path: *const c_char, argv: *const *const c_char) -> c_int;
    execvp(file: *const c_char, argv: *const *const c_char) -> c_int;
    execvpe(file: *const c_char, argv: *const *const c_char, envp: *const *const c_char) -> c_int;
    fexecve(fd: c_int, argv: *const *const c_char, envp: *const *const c_char) -> c_int;
}
