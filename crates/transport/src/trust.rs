//! Whether the process at the daemon's socket is one a client may trust.
//! A client hands its daemon its memory file and a writable descriptor of
//! its backing file: whoever listens at the socket's path gets them. A
//! path anyone could have bound first (a socket in /tmp, a daemon that
//! is not running and a directory others may write) must not be enough,
//! so before sending anything a client asks the kernel who listens
//! (`SO_PEERCRED`: the credentials of the process that called `listen`,
//! which the daemon did as root before dropping to `nobody`) and accepts
//! only root, its own user, or the user `$PAGEPILOT_DAEMON_UID` names.

use std::ffi::OsStr;
use std::os::unix::net::UnixStream;

use rustix::net::sockopt;

use crate::Credentials;

/// The environment variable naming one more user id a client trusts at
/// the daemon's socket (a daemon run by an unprivileged user).
pub const DAEMON_UID_ENV: &str = "PAGEPILOT_DAEMON_UID";

/// The users a client accepts at the daemon's socket: root, the client's
/// effective user (not its real one: a setuid program must not trust the
/// user who ran it), and one more if given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DaemonTrust {
    also: Option<u32>,
}

impl DaemonTrust {
    /// Root and this process's effective user only.
    pub fn root_or_self() -> DaemonTrust {
        DaemonTrust { also: None }
    }

    /// Root, this process's effective user, and `uid`.
    pub fn also(uid: u32) -> DaemonTrust {
        DaemonTrust { also: Some(uid) }
    }

    /// Root, this process's effective user, and `$PAGEPILOT_DAEMON_UID` if
    /// set; a value that is not a user id is refused.
    pub fn from_env() -> Result<DaemonTrust, Untrusted> {
        DaemonTrust::from_value(std::env::var_os(DAEMON_UID_ENV).as_deref())
    }

    /// As [`DaemonTrust::from_env`], given the variable's value (unset:
    /// `None`; set but empty counts as unset).
    pub fn from_value(value: Option<&OsStr>) -> Result<DaemonTrust, Untrusted> {
        let Some(value) = value.filter(|v| !v.is_empty()) else {
            return Ok(DaemonTrust::root_or_self());
        };
        value
            .to_str()
            .and_then(|v| v.trim().parse::<u32>().ok())
            .map(DaemonTrust::also)
            .ok_or_else(|| Untrusted::BadVariable {
                value: value.to_string_lossy().into_owned(),
            })
    }

    /// The user ids accepted, ascending, each once.
    pub fn expected(&self) -> Vec<u32> {
        let mut uids = vec![0, rustix::process::geteuid().as_raw()];
        uids.extend(self.also);
        uids.sort_unstable();
        uids.dedup();
        uids
    }

    /// Who listens at the other end of `stream`, if it is one of
    /// [`DaemonTrust::expected`].
    pub fn check(&self, stream: &UnixStream) -> Result<Credentials, Untrusted> {
        let cred = sockopt::socket_peercred(stream)
            .map_err(|e| Untrusted::Credentials(std::io::Error::from(e)))?;
        let peer = Credentials {
            pid: cred.pid.as_raw_pid() as u32,
            uid: cred.uid.as_raw(),
            gid: cred.gid.as_raw(),
        };
        let expected = self.expected();
        if expected.contains(&peer.uid) {
            Ok(peer)
        } else {
            Err(Untrusted::Peer { peer, expected })
        }
    }
}

/// Checks the process at the other end of `stream` (a connection to the
/// daemon) with [`DaemonTrust::from_env`], before anything is sent on it.
/// Every client of the daemon goes through this one function.
pub fn trusted_daemon(stream: &UnixStream) -> Result<Credentials, Untrusted> {
    DaemonTrust::from_env()?.check(stream)
}

/// Why a client does not talk to what listens at the daemon's socket.
#[derive(Debug, thiserror::Error)]
pub enum Untrusted {
    /// The socket is held by a user the client does not trust.
    #[error(
        "the socket is held by uid {} (pid {}), not by a user this process trusts ({}); if uid {} runs the daemon, set {DAEMON_UID_ENV}={}",
        peer.uid, peer.pid, uid_list(expected), peer.uid, peer.uid
    )]
    Peer {
        /// Who listens, as the kernel reports it.
        peer: Credentials,
        /// The users that would have been accepted.
        expected: Vec<u32>,
    },
    /// `$PAGEPILOT_DAEMON_UID` is not a user id.
    #[error("{DAEMON_UID_ENV}={value:?} is not a user id (a number)")]
    BadVariable {
        /// Its value.
        value: String,
    },
    /// The kernel did not say who listens.
    #[error("cannot ask who holds the socket (SO_PEERCRED): {0}")]
    Credentials(std::io::Error),
}

/// `uid 0, 1000 or 65534`.
pub fn uid_list(uids: &[u32]) -> String {
    let mut text = String::from("uid ");
    for (i, uid) in uids.iter().enumerate() {
        if i > 0 {
            text.push_str(if i + 1 == uids.len() { " or " } else { ", " });
        }
        text.push_str(&uid.to_string());
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn me() -> u32 {
        rustix::process::geteuid().as_raw()
    }

    #[test]
    fn the_variable_adds_one_user_and_a_bad_value_is_refused_naming_it() {
        let unset = DaemonTrust::from_value(None).unwrap();
        assert_eq!(unset, DaemonTrust::root_or_self());
        assert_eq!(DaemonTrust::from_value(Some("".as_ref())).unwrap(), unset);
        let also = DaemonTrust::from_value(Some("65534".as_ref())).unwrap();
        assert_eq!(also, DaemonTrust::also(65534));
        assert!(also.expected().contains(&65534));
        for bad in ["nobody", "-1", "1.5", "99999999999"] {
            let err = DaemonTrust::from_value(Some(bad.as_ref())).unwrap_err();
            assert!(matches!(err, Untrusted::BadVariable { .. }), "{bad}: {err}");
            assert!(err.to_string().contains(DAEMON_UID_ENV), "{err}");
        }
    }

    #[test]
    fn root_and_this_user_are_always_expected_each_once() {
        let expected = DaemonTrust::root_or_self().expected();
        assert!(expected.contains(&0) && expected.contains(&me()));
        assert_eq!(expected.len(), if me() == 0 { 1 } else { 2 });
    }

    #[test]
    fn a_peer_of_this_user_is_trusted() {
        let (a, _b) = UnixStream::pair().unwrap();
        let peer = DaemonTrust::root_or_self().check(&a).unwrap();
        assert_eq!((peer.uid, peer.pid), (me(), std::process::id()));
    }

    #[test]
    fn the_refusal_says_who_holds_the_socket_and_how_to_trust_it() {
        let err = Untrusted::Peer {
            peer: Credentials {
                pid: 42,
                uid: 65534,
                gid: 65534,
            },
            expected: vec![0, 1000],
        };
        assert_eq!(
            err.to_string(),
            "the socket is held by uid 65534 (pid 42), not by a user this process trusts (uid 0 or 1000); if uid 65534 runs the daemon, set PAGEPILOT_DAEMON_UID=65534"
        );
        assert_eq!(uid_list(&[0]), "uid 0");
        assert_eq!(uid_list(&[0, 5, 7]), "uid 0, 5 or 7");
    }
}
