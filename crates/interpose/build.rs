//! Compiles the variadic exec functions (`src/exec_variadic.c`).

fn main() {
    println!("cargo:rerun-if-changed=src/exec_variadic.c");
    cc::Build::new()
        .file("src/exec_variadic.c")
        .compile("pagepilot_run_exec");
}
