//! The applications `bench apps` runs, the built-in policy right for each (the table
//! `--policy APP=POLICY` overrides), and what a prepared application is: a command line over
//! its data.

use std::ffi::OsString;
use std::path::PathBuf;

use serde::Serialize;

use super::tools::Tool;

/// A real program over data larger than the memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum App {
    /// The `sqlite3` shell: a join without an index, the inner table scanned once per outer row.
    Sqlite,
    /// Python and numpy: k-means passes over a float32 `numpy.memmap`.
    Numpy,
    /// `rg --mmap -c`, one pattern after another over one text file.
    Ripgrep,
    /// Python's `lmdb`: uniform random gets.
    Lmdb,
}

/// One row of the table of best policies: the application, the built-in policy right for its
/// access pattern, and why.
pub struct Best {
    /// The application.
    pub app: App,
    /// The policy `pagepilot run --policy` is given in the best row.
    pub policy: &'static str,
    /// Why that policy.
    pub why: &'static str,
}

/// The best policy of each application (its row in the report says which was used).
pub const BEST: [Best; 4] = [
    Best {
        app: App::Sqlite,
        policy: "seq",
        why: "the inner table is a loop larger than the budget, and its B-tree's interior \
              pages are re-read within each scan: SEQ evicts inside the detected sequence and \
              keeps them (mru-live, evicting the last page faulted, evicts them too: at 64M \
              it paged in 1.9x the table per scan and ran 7x slower than seq)",
    },
    Best {
        app: App::Numpy,
        policy: "mru",
        why: "every pass is the same sequential loop over the array",
    },
    Best {
        app: App::Ripgrep,
        policy: "mru",
        why: "each pattern is one more sequential pass over the file",
    },
    Best {
        app: App::Lmdb,
        policy: "clock",
        why: "uniform random gets: no order to exploit, keep what is referenced",
    },
];

impl App {
    /// Every application, in the report's order.
    pub const ALL: [App; 4] = [App::Sqlite, App::Numpy, App::Ripgrep, App::Lmdb];

    /// Its name, as `--apps` takes it.
    pub fn name(self) -> &'static str {
        match self {
            App::Sqlite => "sqlite",
            App::Numpy => "numpy",
            App::Ripgrep => "ripgrep",
            App::Lmdb => "lmdb",
        }
    }

    /// Its best built-in policy ([`BEST`]).
    pub fn best(self) -> &'static Best {
        BEST.iter().find(|b| b.app == self).unwrap_or(&BEST[0])
    }

    /// The programs and modules it needs.
    pub fn tools(self) -> &'static [Tool] {
        match self {
            App::Sqlite => &[Tool::Program("sqlite3", "apt-get install sqlite3")],
            App::Numpy => &[Tool::Module("numpy", "pip install numpy")],
            App::Ripgrep => &[
                Tool::Program("rg", "apt-get install ripgrep"),
                Tool::Program("sh", "apt-get install dash"),
            ],
            App::Lmdb => &[Tool::Module("lmdb", "pip install lmdb")],
        }
    }

    /// Whether it runs in Python.
    pub fn needs_python(self) -> bool {
        self.tools().iter().any(|t| matches!(t, Tool::Module(..)))
    }
}

/// `--policy APP=POLICY`: the application and the policy its best row uses instead.
pub fn parse_override(text: &str) -> Result<(App, String), String> {
    let (app, policy) = text
        .split_once('=')
        .ok_or_else(|| format!("{text:?}: expected APP=POLICY, e.g. lmdb=sieve"))?;
    let app = App::ALL
        .into_iter()
        .find(|a| a.name() == app.trim())
        .ok_or_else(|| {
            let names: Vec<&str> = App::ALL.iter().map(|a| a.name()).collect();
            format!("{app:?} is not an application ({})", names.join(", "))
        })?;
    if policy.trim().is_empty() {
        return Err(format!("{text:?}: no policy after '='"));
    }
    Ok((app, policy.trim().to_string()))
}

/// An application ready to run: its data made, its command line over it.
#[derive(Clone, Debug, Serialize)]
pub struct Workload {
    /// The application.
    pub app: App,
    /// The file its run maps (dropped from the page cache before each run).
    pub data: PathBuf,
    /// Its size, bytes.
    pub data_bytes: u64,
    /// The program and its arguments, as every row runs it.
    #[serde(serialize_with = "lossy")]
    pub argv: Vec<OsString>,
    /// Environment every row sets the same (e.g. one BLAS thread).
    pub env: Vec<(String, String)>,
    /// What one run does, for the report.
    pub what: String,
}

fn lossy<S: serde::Serializer>(argv: &[OsString], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(argv.iter().map(|a| a.to_string_lossy()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_every_application_has_one_best_policy() {
        for app in App::ALL {
            assert_eq!(BEST.iter().filter(|b| b.app == app).count(), 1, "{app:?}");
            assert_eq!(app.best().app, app);
        }
    }

    #[test]
    fn test_an_override_names_its_application_and_keeps_policy_parameters() {
        assert_eq!(
            parse_override("sqlite=seq:L=50,M=20").unwrap(),
            (App::Sqlite, "seq:L=50,M=20".to_string())
        );
        let e = parse_override("mysql=mru").unwrap_err();
        assert!(e.contains("mysql") && e.contains("lmdb"), "{e}");
        assert!(parse_override("numpy").unwrap_err().contains("APP=POLICY"));
        assert!(parse_override("numpy=").is_err());
    }
}
