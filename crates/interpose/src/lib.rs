//! `libpagepilot_run.so`, the interposer `pagepilot run` loads with
//! `LD_PRELOAD`: it turns an unmodified program's shared file mappings
//! that match the rules into pagepilot regions, and leaves every other
//! mapping to the kernel, saying why in its log (docs/run.md).
//!
//! One region per file, reaching past the file's end; each of the
//! program's mappings is a window of it at the mapping's file offset, so
//! that all mappings of a file share its frames. The program's `read` and
//! `write` family on the file goes beside the region (`Region::write_beside`),
//! as through the kernel's one page cache. Calls made by pagepilot itself
//! (the interposer's code, the pager's threads) pass straight on.

mod budget;
mod exec;
mod exports;
mod fds;
mod io;
mod lock;
mod log;
mod maps;
mod open;
mod real;
mod remap;
mod state;
mod taken;

/// Reads the configuration when the library is loaded, before `main`.
#[used]
#[link_section = ".init_array"]
static INIT: extern "C" fn() = init;

extern "C" fn init() {
    state::init();
}
