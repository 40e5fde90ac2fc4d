//! How an error is shown to a person: its message, then each cause's,
//! joined with ": ".
//!
//! pagepilot's errors keep one convention: a cause is either part of its
//! error's message or returned by `source()`, never both. So a message says
//! what failed and where, and whoever shows the error to a person (the CLI,
//! the C API's `err` buffer, Python's exceptions, the daemon's replies and
//! logs) walks the causes with [`chain`] to say why.

use std::error::Error;
use std::fmt;

/// An error and its causes, displayed as `error: cause: cause...`.
///
/// A cause whose text its parent's message already shows is left out: an
/// error from outside the convention (a library's, or one not converted
/// yet) then still reads once.
#[derive(Clone, Copy)]
pub struct Chain<'a>(&'a (dyn Error + 'a));

/// The error `e` with its causes, for `{}` or `.to_string()`.
pub fn chain<'a>(e: &'a (dyn Error + 'a)) -> Chain<'a> {
    Chain(e)
}

impl fmt::Display for Chain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parent = self.0.to_string();
        f.write_str(&parent)?;
        let mut cause = self.0.source();
        while let Some(c) = cause {
            let text = c.to_string();
            if !text.is_empty() && !parent.contains(&text) {
                write!(f, ": {text}")?;
            }
            parent = text;
            cause = c.source();
        }
        Ok(())
    }
}

impl fmt::Debug for Chain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An error with a fixed message and an optional cause.
    #[derive(Debug)]
    struct E(&'static str, Option<Box<E>>);

    impl fmt::Display for E {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(self.0)
        }
    }

    impl Error for E {
        fn source(&self) -> Option<&(dyn Error + 'static)> {
            self.1.as_deref().map(|e| e as &(dyn Error + 'static))
        }
    }

    #[test]
    fn every_cause_follows_its_error_once_joined_by_colons() {
        let e = E(
            "cannot open backing file /x",
            Some(Box::new(E(
                "the lease",
                Some(Box::new(E("permission denied", None))),
            ))),
        );
        assert_eq!(
            chain(&e).to_string(),
            "cannot open backing file /x: the lease: permission denied"
        );
    }

    #[test]
    fn an_error_without_a_cause_is_its_message() {
        assert_eq!(
            chain(&E("budget too small", None)).to_string(),
            "budget too small"
        );
    }

    #[test]
    fn a_cause_its_parent_already_shows_is_not_repeated_but_its_own_cause_is() {
        // A parent outside the convention prints its cause; the cause's own
        // cause, which the parent does not show, still follows.
        let e = E(
            "socket: no route: EHOSTUNREACH",
            Some(Box::new(E("no route", Some(Box::new(E("at hop 3", None)))))),
        );
        assert_eq!(
            chain(&e).to_string(),
            "socket: no route: EHOSTUNREACH: at hop 3"
        );
    }
}
