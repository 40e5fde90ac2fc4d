//! `/dev/userfaultfd` granted to a group (group read and write), as
//! `packaging/99-pagepilot-userfaultfd.rules` does, or to root alone, for a
//! guard's life: the tests of ordinary users switch it and put it back.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::sync::{Mutex, MutexGuard};

const DEVICE: &str = "/dev/userfaultfd";

/// One guard at a time in a test binary.
static ONE: Mutex<()> = Mutex::new(());

/// The device as a test set it; its group and mode are put back on drop,
/// also when the test fails.
pub struct DeviceGranted {
    gid: u32,
    mode: u32,
    _one: MutexGuard<'static, ()>,
}

impl DeviceGranted {
    /// Grants the device to group `to` (mode 0660), or to root alone
    /// (`None`, mode 0600).
    pub fn grant(to: Option<u32>) -> DeviceGranted {
        let one = ONE.lock().unwrap_or_else(|p| p.into_inner());
        let meta = std::fs::metadata(DEVICE).expect("the userfaultfd device");
        let old = DeviceGranted {
            gid: meta.gid(),
            mode: meta.mode() & 0o7777,
            _one: one,
        };
        if let Some(g) = to {
            std::os::unix::fs::chown(DEVICE, None, Some(g)).expect("chown the device");
        }
        let mode = if to.is_some() { 0o660 } else { 0o600 };
        std::fs::set_permissions(DEVICE, std::fs::Permissions::from_mode(mode))
            .expect("chmod the device");
        old
    }
}

impl Drop for DeviceGranted {
    fn drop(&mut self) {
        let _ = std::os::unix::fs::chown(DEVICE, None, Some(self.gid));
        let _ = std::fs::set_permissions(DEVICE, std::fs::Permissions::from_mode(self.mode));
    }
}
