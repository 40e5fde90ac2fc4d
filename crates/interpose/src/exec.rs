//! `exec`: the new image starts without the regions (and without this
//! process's exit handlers), so their dirty pages are written back first,
//! as the kernel's page cache would keep them. Only in the process that
//! took the files over, checked before any lock or allocation: a child
//! after `fork` (or `vfork`) uses the kernel's mapping, whose stores the
//! page cache keeps.
//!
//! The variadic forms (`execl`, `execlp`, `execle`) gather their lists in
//! `exec_variadic.c` and call these; the library exports them through
//! naked functions that jump there, every register and the stack as the
//! caller left them.

#![allow(missing_docs)]

use std::ffi::{c_char, c_int};

use crate::{real, state};

/// Writes back the regions of the files this process took over.
fn write_back() {
    if state::bypass() || !state::took_here() {
        return;
    }
    let pid = std::process::id();
    let Some(files) = state::with(|s| {
        s.files
            .iter()
            .filter(|f| !f.private && f.owner == pid)
            .cloned()
            .collect::<Vec<_>>()
    }) else {
        return;
    };
    state::inside(|| {
        for f in files {
            if let Err(e) = f.region.flush() {
                f.log
                    .line(format_args!("exec: write-back of {} failed: {e}", f.path));
            }
        }
    });
}

/// # Safety
/// As execve(2).
#[no_mangle]
pub unsafe extern "C" fn execve(
    path: *const c_char,
    argv: *const *const c_char,
    envp: *const *const c_char,
) -> c_int {
    write_back();
    // SAFETY: the program's own call.
    unsafe { real::execve(path, argv, envp) }
}

/// # Safety
/// As execv(3).
#[no_mangle]
pub unsafe extern "C" fn execv(path: *const c_char, argv: *const *const c_char) -> c_int {
    write_back();
    // SAFETY: the program's own call.
    unsafe { real::execv(path, argv) }
}

/// # Safety
/// As execvp(3).
#[no_mangle]
pub unsafe extern "C" fn execvp(file: *const c_char, argv: *const *const c_char) -> c_int {
    write_back();
    // SAFETY: the program's own call.
    unsafe { real::execvp(file, argv) }
}

/// # Safety
/// As execvpe(3).
#[no_mangle]
pub unsafe extern "C" fn execvpe(
    file: *const c_char,
    argv: *const *const c_char,
    envp: *const *const c_char,
) -> c_int {
    write_back();
    // SAFETY: the program's own call.
    unsafe { real::execvpe(file, argv, envp) }
}

/// # Safety
/// As fexecve(3).
#[no_mangle]
pub unsafe extern "C" fn fexecve(
    fd: c_int,
    argv: *const *const c_char,
    envp: *const *const c_char,
) -> c_int {
    write_back();
    // SAFETY: the program's own call.
    unsafe { real::fexecve(fd, argv, envp) }
}

extern "C" {
    fn pagepilot_run_execl();
    fn pagepilot_run_execlp();
    fn pagepilot_run_execle();
}

/// execl(3): jumps to `pagepilot_run_execl` (`exec_variadic.c`).
#[unsafe(naked)]
#[no_mangle]
pub extern "C" fn execl() {
    core::arch::naked_asm!("jmp {f}", f = sym pagepilot_run_execl)
}

/// execlp(3): jumps to `pagepilot_run_execlp` (`exec_variadic.c`).
#[unsafe(naked)]
#[no_mangle]
pub extern "C" fn execlp() {
    core::arch::naked_asm!("jmp {f}", f = sym pagepilot_run_execlp)
}

/// execle(3): jumps to `pagepilot_run_execle` (`exec_variadic.c`).
#[unsafe(naked)]
#[no_mangle]
pub extern "C" fn execle() {
    core::arch::naked_asm!("jmp {f}", f = sym pagepilot_run_execle)
}
