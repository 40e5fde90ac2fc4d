//! The socket's file: made room for at start (a stale one replaced, a live
//! one refused), removed at the end if it is still this server's.

use std::os::unix::fs::MetadataExt;
use std::os::unix::net::UnixStream;
use std::path::Path;

use super::{log, Server, ServerError};

impl Drop for Server {
    fn drop(&mut self) {
        // Only the socket this server made: another daemon may have
        // replaced it since.
        let ours = std::fs::symlink_metadata(&self.socket)
            .is_ok_and(|m| (m.dev(), m.ino()) == self.socket_id);
        if !ours {
            return;
        }
        match std::fs::remove_file(&self.socket) {
            // A daemon that dropped root may no longer write the directory
            // (/run). A socket nobody answers at is harmless: clients get
            // "connection refused", as with none, and the next start
            // replaces it (`claim`).
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => log!(
                "the socket {} stays (this user may not remove it from its directory); the next start replaces it",
                self.socket.display()
            ),
            _ => {}
        }
    }
}

/// Makes room for a socket at `path`: nothing there, or a socket nobody
/// answers at (a daemon that died), which is removed.
pub(super) fn claim(path: &Path) -> Result<(), ServerError> {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return Ok(());
    };
    if !std::os::unix::fs::FileTypeExt::is_socket(&meta.file_type()) {
        return Err(ServerError::NotASocket(path.to_owned()));
    }
    match UnixStream::connect(path) {
        Ok(_) => Err(ServerError::AlreadyRunning(path.to_owned())),
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {
            log!("removing the stale socket {}", path.display());
            std::fs::remove_file(path).map_err(|source| ServerError::Listen {
                path: path.to_owned(),
                source,
            })
        }
        Err(source) => Err(ServerError::Listen {
            path: path.to_owned(),
            source,
        }),
    }
}
