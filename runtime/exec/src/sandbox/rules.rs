//! The Landlock ruleset every sandboxed process is restricted by, built once per sandbox.
//!
//! Reads: listing any directory, reading and executing beneath every top-level entry but
//! `/dev`, and of `/dev` only the harmless nodes. Another session's terminal under `/dev/pts`
//! can neither be read nor driven. Writes: beneath the workspace and the private temporary
//! directory, where making device nodes is still refused. No TCP bind or connect, no device
//! ioctl except on the command's own terminal, no signal to a process outside the command's
//! own tree, no abstract unix socket made outside it; and from Landlock ABI 9 on, no connect
//! to a path-named unix socket outside the workspace.

use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use crate::SetupError;

use landlock::{
    path_beneath_rules, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, Ruleset,
    RulesetAttr, RulesetCreatedAttr, Scope, ABI,
};

/// The oldest Landlock ABI the sandbox runs on: 6 (Linux 6.12) is the first that scopes
/// signals and abstract unix sockets, and controls device ioctls (5).
pub const MINIMUM_ABI: i32 = 6;

/// The ABI that lets the ruleset refuse connecting to path-named unix sockets.
pub const UNIX_SOCKET_ABI: i32 = 9;

/// Device nodes a confined process may open, and how.
const DEVICES: &[(&str, Device)] = &[
    ("/dev/null", Device::ReadWrite),
    ("/dev/zero", Device::ReadWrite),
    ("/dev/full", Device::ReadWrite),
    ("/dev/random", Device::Read),
    ("/dev/urandom", Device::Read),
    // A process's own controlling terminal: ioctls on it only reach its own session.
    ("/dev/tty", Device::Terminal),
];

#[derive(Clone, Copy)]
enum Device {
    Read,
    ReadWrite,
    Terminal,
}

impl Device {
    fn access(self) -> BitFlags<AccessFs> {
        match self {
            Device::Read => AccessFs::ReadFile.into(),
            Device::ReadWrite => AccessFs::ReadFile | AccessFs::WriteFile,
            Device::Terminal => AccessFs::ReadFile | AccessFs::WriteFile | AccessFs::IoctlDev,
        }
    }
}

/// The Landlock ABI this kernel offers (0 when it has none or it is disabled).
pub fn kernel_abi() -> i32 {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
    // SAFETY: with a null attribute, size 0 and the version flag the call reads no memory; it
    // only returns the ABI number or -1.
    let abi = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    i32::try_from(abi).unwrap_or(0).max(0)
}

/// `Err` names what is missing when `abi` is below the minimum.
pub fn check_abi(abi: i32) -> Result<(), SetupError> {
    if abi >= MINIMUM_ABI {
        return Ok(());
    }
    Err(SetupError::KernelTooOld {
        release: kernel_release(),
        abi,
        minimum: MINIMUM_ABI,
    })
}

fn kernel_release() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|r| r.trim().to_owned())
        .unwrap_or_else(|_| "release unknown".to_owned())
}

/// Builds the ruleset for a kernel offering `abi` (at least [`MINIMUM_ABI`]).
pub fn build(abi: i32, workspace: &Path, temp: &Path) -> Result<OwnedFd, SetupError> {
    let with_unix = abi >= UNIX_SOCKET_ABI;
    let base = ABI::V6;
    let mut handled = AccessFs::from_all(base);
    if with_unix {
        handled |= AccessFs::ResolveUnix;
    }
    let writable = handled & !(AccessFs::MakeChar | AccessFs::MakeBlock | AccessFs::IoctlDev);
    let refused = |e: landlock::RulesetError| SetupError::Unenforceable {
        reason: e.to_string(),
    };
    let created = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(handled)
        .and_then(|r| r.handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp))
        .and_then(|r| r.scope(Scope::Signal | Scope::AbstractUnixSocket))
        .and_then(|r| r.create())
        .and_then(|r| r.add_rules(path_beneath_rules(["/"], AccessFs::ReadDir)))
        .and_then(|r| {
            r.add_rules(path_beneath_rules(
                readable_roots(),
                AccessFs::from_read(base),
            ))
        })
        .and_then(|r| {
            r.add_rules(path_beneath_rules(
                [workspace, temp],
                writable | AccessFs::from_read(base),
            ))
        })
        .map_err(refused)?;
    let created = DEVICES
        .iter()
        .filter(|(path, _)| Path::new(path).exists())
        .try_fold(created, |r, (path, device)| {
            r.add_rules(path_beneath_rules([path], device.access()))
        })
        .map_err(refused)?;
    Option::<OwnedFd>::from(created).ok_or_else(|| SetupError::Unenforceable {
        reason: "Landlock is not enabled".to_owned(),
    })
}

/// Every top-level entry but `/dev`, whose nodes are granted one by one.
fn readable_roots() -> Vec<PathBuf> {
    std::fs::read_dir("/")
        .map(|entries| {
            entries
                .flatten()
                .map(|entry| entry.path())
                // A dangling link (an absent `/initrd.img`) cannot be opened for a rule.
                .filter(|path| path != Path::new("/dev") && path.exists())
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_old_kernel_is_refused_with_what_it_lacks() {
        let error = check_abi(4).unwrap_err();
        assert!(
            matches!(
                error,
                SetupError::KernelTooOld {
                    abi: 4,
                    minimum: 6,
                    ..
                }
            ),
            "{error:?}"
        );
        let message = error.to_string();
        assert!(message.contains("needs Landlock ABI 6"), "{message}");
        assert!(message.contains("offers Landlock ABI 4"), "{message}");
        let message = check_abi(0).unwrap_err().to_string();
        assert!(message.contains("no Landlock"), "{message}");
        assert!(check_abi(6).is_ok() && check_abi(9).is_ok());
    }
}
