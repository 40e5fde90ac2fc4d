//! Lets the crate's own test binaries find the `libpython` they link (an
//! rpath to the interpreter's library directory). The extension module
//! maturin builds links no `libpython` (`PYO3_BUILD_EXTENSION_MODULE`), so
//! this changes nothing there.

fn main() {
    pyo3_build_config::add_libpython_rpath_link_args();
}
