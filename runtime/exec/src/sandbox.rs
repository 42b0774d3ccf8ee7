//! The `sandbox` backend: every process it starts may read and execute anything the user can,
//! but write only beneath the workspace and a private temporary directory (plus the harmless
//! character devices such as `/dev/null`), and may not bind or connect TCP sockets. Both are
//! enforced by the kernel with Landlock (ABI 4, Linux 6.7 and later); a kernel that cannot
//! enforce them is refused when the backend is created, never silently run unconfined. Where
//! codemode may create a network namespace (as root, or with `CAP_SYS_ADMIN`), each process
//! also gets an empty one, which cuts UDP and every other protocol too.
//!
//! The ruleset is built once, in the parent; the child only calls `prctl(PR_SET_NO_NEW_PRIVS)`,
//! `unshare(CLONE_NEWNET)` and `landlock_restrict_self` between fork and exec: raw system calls,
//! which are safe there.

use std::ffi::OsString;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use landlock::{
    path_beneath_rules, Access, AccessFs, AccessNet, CompatLevel, Compatible, Ruleset, RulesetAttr,
    RulesetCreatedAttr, ABI,
};
use process_wrap::tokio::CommandWrap;

use crate::backend::Backend;

/// The Landlock ABI whose rights the sandbox needs: filesystem writes and TCP.
const REQUIRED_ABI: ABI = ABI::V4;

/// Character devices a confined process may still write to.
const WRITABLE_DEVICES: &[&str] = &["/dev/null", "/dev/zero", "/dev/full", "/dev/tty"];

pub struct Sandbox {
    ruleset: OwnedFd,
    temp: PathBuf,
    network_namespace: bool,
}

impl Sandbox {
    /// Prepares the confinement for `workspace`. `Err` says why this kernel cannot enforce it.
    pub fn new(workspace: &Path) -> Result<Self, String> {
        let workspace = workspace
            .canonicalize()
            .map_err(|e| format!("the workspace {} cannot be used: {e}", workspace.display()))?;
        let temp = private_temp_dir()?;
        let abi = REQUIRED_ABI;
        let refused = |e: landlock::RulesetError| {
            format!(
                "this kernel cannot enforce the sandbox (Landlock with filesystem and TCP rules, Linux 6.7 or later, enabled at boot): {e}"
            )
        };
        let created = Ruleset::default()
            .set_compatibility(CompatLevel::HardRequirement)
            .handle_access(AccessFs::from_all(abi))
            .and_then(|r| r.handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp))
            .and_then(|r| r.create())
            .and_then(|r| r.add_rules(path_beneath_rules(["/"], AccessFs::from_read(abi))))
            .and_then(|r| {
                r.add_rules(path_beneath_rules(
                    [workspace.as_path(), temp.as_path()],
                    AccessFs::from_all(abi),
                ))
            })
            .and_then(|r| {
                r.add_rules(path_beneath_rules(
                    WRITABLE_DEVICES,
                    AccessFs::ReadFile | AccessFs::WriteFile,
                ))
            })
            .map_err(|e| {
                let _ = std::fs::remove_dir_all(&temp);
                refused(e)
            })?;
        let Some(ruleset) = Option::<OwnedFd>::from(created) else {
            let _ = std::fs::remove_dir_all(&temp);
            return Err(
                "this kernel cannot enforce the sandbox: Landlock is not enabled".to_owned(),
            );
        };
        Ok(Self {
            ruleset,
            temp,
            network_namespace: can_create_network_namespace(),
        })
    }

    /// The private temporary directory (`TMPDIR` of every confined process).
    pub fn temp_dir(&self) -> &Path {
        &self.temp
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.temp);
    }
}

fn private_temp_dir() -> Result<PathBuf, String> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let dir = std::env::temp_dir().join(format!(
        "codemode-sandbox-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let mut builder = std::fs::DirBuilder::new();
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(&dir).map_err(|e| {
        format!(
            "cannot create the sandbox's temporary directory {}: {e}",
            dir.display()
        )
    })?;
    dir.canonicalize()
        .map_err(|e| format!("cannot resolve {}: {e}", dir.display()))
}

/// Whether this process may give a child an empty network namespace.
fn can_create_network_namespace() -> bool {
    // A throwaway child answers without changing this process.
    std::process::Command::new("/bin/sh")
        .arg("-c")
        .arg("exit 0")
        .env_clear()
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .pre_exec_unshare_net()
        .status()
        .is_ok_and(|s| s.success())
}

trait PreExecUnshareNet {
    fn pre_exec_unshare_net(&mut self) -> &mut Self;
}

impl PreExecUnshareNet for std::process::Command {
    fn pre_exec_unshare_net(&mut self) -> &mut Self {
        use std::os::unix::process::CommandExt;
        // SAFETY: the closure only makes one raw system call, which is async-signal-safe.
        unsafe {
            self.pre_exec(|| {
                if libc::unshare(libc::CLONE_NEWNET) == 0 {
                    Ok(())
                } else {
                    Err(std::io::Error::last_os_error())
                }
            })
        }
    }
}

impl Backend for Sandbox {
    fn name(&self) -> &'static str {
        "sandbox"
    }

    fn confine(&self, command: &mut CommandWrap) -> Result<(), String> {
        let ruleset = self.ruleset.as_raw_fd();
        let network_namespace = self.network_namespace;
        let tmp: OsString = self.temp.clone().into();
        let command = command.command_mut();
        command.env("TMPDIR", tmp);
        // SAFETY: between fork and exec the closure makes only raw system calls (prctl,
        // unshare, landlock_restrict_self), which are async-signal-safe; it allocates nothing.
        // The ruleset descriptor is open in the child until exec (it is close-on-exec).
        unsafe {
            command.pre_exec(move || {
                if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                if network_namespace && libc::unshare(libc::CLONE_NEWNET) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                if libc::syscall(libc::SYS_landlock_restrict_self, ruleset, 0u32) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        Ok(())
    }

    fn forks(&self) -> bool {
        true
    }
}
