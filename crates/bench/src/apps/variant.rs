//! The three rows of every application, and the command line of each: the program as it is
//! (the kernel), under `pagepilot run` with no option (its defaults: SEQ, 3/4 of the memory
//! cgroup's limit), and under `pagepilot run --policy BEST --budget B`. The pagepilot rows
//! add `--log` only, to read their page-ins back.

use std::ffi::OsString;
use std::path::PathBuf;

use serde::Serialize;

use super::error::AppsError;

/// The interposer's file name, beside the `pagepilot` binary (as `pagepilot run` looks).
const LIBRARY: &str = "libpagepilot_run.so";
/// Where `pagepilot run` is told to find the interposer instead.
const LIBRARY_ENV: &str = "PAGEPILOT_RUN_LIB";

/// A row of an application.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Variant {
    /// The program run plainly.
    Kernel,
    /// `pagepilot run -- PROGRAM`.
    Defaults,
    /// `pagepilot run --policy BEST --budget B -- PROGRAM`.
    Best,
}

impl Variant {
    /// The rows, in the report's order.
    pub const ALL: [Variant; 3] = [Variant::Kernel, Variant::Defaults, Variant::Best];

    /// Its name in the report.
    pub fn name(self) -> &'static str {
        match self {
            Variant::Kernel => "kernel",
            Variant::Defaults => "defaults",
            Variant::Best => "best",
        }
    }
}

/// How the pagepilot rows run: this binary's `run` and the best row's settings.
pub struct Launcher {
    /// The `pagepilot` binary (this one).
    pub exe: PathBuf,
    /// Where the interposer logs go, one file per run.
    pub log_dir: PathBuf,
}

impl Launcher {
    /// This binary, once its interposer is found: beside it, or at `$PAGEPILOT_RUN_LIB`.
    pub fn find(log_dir: PathBuf) -> Result<Launcher, AppsError> {
        let exe = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("/proc/self/exe"));
        let library = match std::env::var_os(LIBRARY_ENV) {
            Some(p) => PathBuf::from(p),
            None => exe
                .parent()
                .map_or_else(|| PathBuf::from(LIBRARY), |d| d.join(LIBRARY)),
        };
        if !library.is_file() {
            return Err(AppsError::NoInterposer(library));
        }
        Ok(Launcher { exe, log_dir })
    }

    /// The command line of `variant` over `program`, and the log its run writes (pagepilot
    /// rows). `best` is the best row's policy and budget.
    pub fn argv(
        &self,
        variant: Variant,
        program: &[OsString],
        best: (&str, u64),
        tag: &str,
    ) -> (Vec<OsString>, Option<PathBuf>) {
        if variant == Variant::Kernel {
            return (program.to_vec(), None);
        }
        let log = self.log_dir.join(format!("{tag}-{}.log", variant.name()));
        let mut argv: Vec<OsString> = vec![self.exe.clone().into(), "run".into()];
        if variant == Variant::Best {
            argv.extend(["--policy".into(), best.0.into()]);
            argv.extend(["--budget".into(), best.1.to_string().into()]);
        }
        argv.extend(["--log".into(), log.clone().into_os_string(), "--".into()]);
        argv.extend(program.iter().cloned());
        (argv, Some(log))
    }
}

/// The best row's budget: the limit less `headroom` (pagepilot's own memory, the program's
/// heap and libraries must fit beside the frames in the same cgroup).
pub fn best_budget(memory: u64, headroom: u64) -> Result<u64, AppsError> {
    memory
        .checked_sub(headroom)
        .filter(|&b| b >= 1 << 20)
        .ok_or(AppsError::NoBudget { memory, headroom })
}

/// A directory of its own for this invocation's logs.
pub fn log_dir() -> PathBuf {
    std::env::temp_dir().join(format!("pagepilot-bench-apps-{}", std::process::id()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn test_rows_differ_only_by_pagepilot_run_and_its_options() {
        let l = Launcher {
            exe: "/bin/pagepilot".into(),
            log_dir: "/tmp/logs".into(),
        };
        let prog: Vec<OsString> = vec!["rg".into(), "x".into()];
        let (k, log) = l.argv(Variant::Kernel, &prog, ("mru", 1 << 20), "rg-1");
        assert_eq!((k, log), (prog.clone(), None));
        let (d, log) = l.argv(Variant::Defaults, &prog, ("mru", 1 << 20), "rg-1");
        let d: Vec<_> = d.iter().map(|a| a.to_str().unwrap()).collect();
        assert_eq!(
            d,
            [
                "/bin/pagepilot",
                "run",
                "--log",
                "/tmp/logs/rg-1-defaults.log",
                "--",
                "rg",
                "x"
            ]
        );
        assert_eq!(log.unwrap(), Path::new("/tmp/logs/rg-1-defaults.log"));
        let (b, _) = l.argv(Variant::Best, &prog, ("mru", 1 << 20), "rg-1");
        let b: Vec<_> = b.iter().map(|a| a.to_str().unwrap()).collect();
        assert_eq!(&b[2..6], ["--policy", "mru", "--budget", "1048576"]);
        assert!(best_budget(32 << 20, 16 << 20).is_ok());
        assert!(best_budget(16 << 20, 16 << 20).is_err());
    }
}
