//! The programs the applications need, found before anything runs: a missing one is named
//! with how to install it, rather than failing in the middle of a round.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::app::App;
use super::error::AppsError;

/// Something an application needs installed.
#[derive(Clone, Copy, Debug)]
pub enum Tool {
    /// A program on `PATH`, and how to install it by hand.
    Program(&'static str, &'static str),
    /// A module of the Python interpreter (`$PYTHON`, else `python3`), and how to install it.
    Module(&'static str, &'static str),
}

/// The Python interpreter the applications run: `$PYTHON`, else `python3`.
fn python_name() -> String {
    std::env::var("PYTHON").unwrap_or_else(|_| "python3".into())
}

/// `name` on `PATH` (or `name` itself when it holds a `/`), if it is an executable file.
pub fn which(name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let runs = |p: &Path| {
        p.metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if name.contains('/') {
        let p = PathBuf::from(name);
        return runs(&p).then_some(p);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| runs(p))
}

/// Checks every tool of `apps`; returns the Python interpreter's own executable when one
/// needs Python (`sys.executable`: a version manager's shim would otherwise run, and be
/// read from the disk, inside every measured run).
pub fn check(apps: &[App]) -> Result<Option<PathBuf>, AppsError> {
    let mut python = None;
    for &app in apps {
        for tool in app.tools() {
            match *tool {
                Tool::Program(name, install) => {
                    if which(name).is_none() {
                        return Err(AppsError::Missing {
                            app: app.name(),
                            program: name.into(),
                            install,
                        });
                    }
                }
                Tool::Module(module, install) => {
                    let exe = interpreter_with(module).ok_or_else(|| AppsError::Missing {
                        app: app.name(),
                        program: format!("{} with the module {module}", python_name()),
                        install,
                    })?;
                    python = Some(exe);
                }
            }
        }
    }
    Ok(python)
}

/// The interpreter's `sys.executable`, if it imports `module`.
fn interpreter_with(module: &str) -> Option<PathBuf> {
    let out = Command::new(python_name())
        .args([
            "-c",
            &format!("import sys, {module}; print(sys.executable)"),
        ])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    let exe = String::from_utf8(out.stdout).ok()?;
    let exe = exe.trim();
    (out.status.success() && !exe.is_empty()).then(|| PathBuf::from(exe))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_which_finds_the_shell_and_not_a_made_up_program() {
        assert!(which("sh").is_some());
        assert!(which("pagepilot-no-such-program").is_none());
        assert!(which("/nonexistent/sh").is_none());
    }
}
