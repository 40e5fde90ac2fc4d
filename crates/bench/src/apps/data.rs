//! The applications' data: made once per size into `--dir` (under a name that says the size
//! and the generator's version), reused by every run and every later invocation. A file is
//! made under a temporary name and renamed when complete, so an interrupted generation is
//! never taken for data.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use pagepilot_pager::sys;

use super::error::AppsError;
use crate::datafile::DataFileError;
use crate::error::IoContext;
use crate::BenchError;

/// Where the data goes without `--dir`: on the disk (`/tmp` may be tmpfs), kept across boots.
pub const DEFAULT_DIR: &str = "/var/tmp/pagepilot-bench-apps";

/// What making an application's data needs to know.
pub struct DataCx {
    /// The directory of the data.
    pub dir: PathBuf,
    /// `--memory`, bytes: the sizes are relative to it.
    pub memory: u64,
    /// The Python interpreter, when an application needs one.
    pub python: Option<PathBuf>,
}

impl DataCx {
    /// The path of a data file or directory: `name`, the memory it is sized for, `version`.
    pub fn path(&self, name: &str, version: u32, ext: &str) -> PathBuf {
        let size = crate::scale::size_label(self.memory);
        self.dir.join(format!("{name}-{size}-v{version}{ext}"))
    }

    /// The Python interpreter (checked by [`super::tools::check`] for the apps that need it).
    pub fn python(&self) -> &Path {
        self.python.as_deref().unwrap_or(Path::new("python3"))
    }

    /// Makes `path` once ([`make_once`]) by running `script` with the Python interpreter,
    /// given the temporary path and `args`; a failure is `app`'s.
    pub fn make_with_python(
        &self,
        app: &'static str,
        path: &Path,
        what: &str,
        script: &str,
        args: &[u64],
    ) -> Result<bool, BenchError> {
        make_once(path, what, |tmp| {
            let mut command = Command::new(self.python());
            command.args(["-c", script]).arg(tmp);
            command.args(args.iter().map(u64::to_string));
            generate(app, &mut command).map(drop)
        })
    }
}

/// Creates `dir` if needed; refuses tmpfs (no disk to read from: the bench would measure
/// memory copies).
pub fn ensure_dir(dir: &Path) -> Result<(), BenchError> {
    std::fs::create_dir_all(dir).on("creating", dir)?;
    if sys::is_tmpfs(dir).on("checking the file system of", dir)? {
        return Err(DataFileError::Tmpfs(dir.to_path_buf()).into());
    }
    Ok(())
}

/// Makes `path` with `build` (given a temporary path beside it) unless it exists; says on
/// stderr what it makes. Returns whether it made it.
pub fn make_once(
    path: &Path,
    what: &str,
    build: impl FnOnce(&Path) -> Result<(), BenchError>,
) -> Result<bool, BenchError> {
    if path.exists() {
        return Ok(false);
    }
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".partial");
    let tmp = PathBuf::from(tmp);
    remove(&tmp)?;
    eprintln!("bench apps: making {what} in {} (once)", path.display());
    build(&tmp)?;
    std::fs::rename(&tmp, path).on("renaming into place", path)?;
    Ok(true)
}

/// Removes a file or a directory tree, if there.
fn remove(path: &Path) -> Result<(), BenchError> {
    let r = if path.is_dir() {
        std::fs::remove_dir_all(path)
    } else {
        std::fs::remove_file(path)
    };
    match r {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e).on("removing", path),
        _ => Ok(()),
    }
}

/// Runs a generator to completion; its failure is [`AppsError::Prepare`] with its stderr.
pub fn generate(app: &'static str, command: &mut Command) -> Result<String, BenchError> {
    let out = command
        .stdin(Stdio::null())
        .output()
        .doing("starting a data generator")?;
    if !out.status.success() {
        return Err(AppsError::Prepare {
            app,
            status: out.status,
            stderr: tail(&out.stderr),
        }
        .into());
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The last few lines of a program's output, for an error message.
pub fn tail(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(5)..].join(" | ")
}

/// The size of a data file.
pub fn size_of(path: &Path) -> Result<u64, BenchError> {
    Ok(std::fs::metadata(path)
        .on("reading the size of", path)?
        .len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_made_once_then_reused() {
        let dir = std::env::temp_dir().join(format!("pp-apps-data-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("x.dat");
        let build = |p: &Path| std::fs::write(p, b"data").on("writing", p);
        assert!(make_once(&path, "test data", build).unwrap());
        assert!(!make_once(&path, "test data", |_| unreachable!()).unwrap());
        assert_eq!(std::fs::read(&path).unwrap(), b"data");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn test_tail_keeps_the_last_lines() {
        assert_eq!(tail(b"a\nb\n\nc\nd\ne\nf\ng\n"), "c | d | e | f | g");
    }
}
