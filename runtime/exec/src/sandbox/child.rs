//! What the child that becomes `bwrap` does to itself between fork and exec:
//! - it leaves codemode's session keyring for a new, empty one, and joins the command's
//!   cgroups where there are;
//! - where codemode runs as root, it takes a mount namespace of its own, mounts the workspace
//!   there through an idmapping (the workspace's owner seen as the sandbox's user, so the
//!   sandbox may write it while owning nothing else), caps the processes the sandbox's user
//!   may run, and becomes that unprivileged user before it executes `bwrap`, which then maps
//!   root of the command's user namespace to it;
//! - it lets `bwrap` inherit the descriptors of the seccomp programs.
//!
//! Everything here runs in the child of a fork of a multi-threaded process, so it may only
//! make system calls: every buffer it reads is prepared by the parent, and no step allocates
//! (`io::Error::last_os_error` does not).

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::Arc;

/// The unprivileged user and group a sandbox runs as where codemode runs as root: the kernel's
/// overflow ids, `nobody` and `nogroup`.
pub const SANDBOX_ID: u32 = 65_534;

/// What the child needs where codemode runs as root, prepared by the parent.
pub struct AsRoot {
    /// A user namespace whose map takes the workspace's owner to [`SANDBOX_ID`], for the
    /// idmapped mount. Open for as long as a plan that names it exists.
    pub idmap: OwnedFd,
    /// The workspace, and the empty directory it is mounted on for `bwrap` to bind: a path
    /// the sandbox's user can reach, which the workspace's own path may not be.
    pub workspace: CString,
    pub stage: CString,
    /// The most processes the sandbox's user may run, across every sandboxed command.
    pub max_processes: u64,
}

// <linux/mount.h>, not in every libc release this builds with.
const OPEN_TREE_CLONE: libc::c_uint = 1;
const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 4;
const MOUNT_ATTR_NOSUID: u64 = 0x2;
const MOUNT_ATTR_NODEV: u64 = 0x4;
const MOUNT_ATTR_IDMAP: u64 = 0x0010_0000;
const KEYCTL_JOIN_SESSION_KEYRING: libc::c_long = 1;

#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

/// The child's steps. `cgroups` are the `cgroup.procs` of the command's cgroups; `inherited`
/// the descriptors `bwrap` reads its settings and seccomp programs from.
pub fn prepare(
    as_root: Option<&Arc<AsRoot>>,
    cgroups: &[RawFd],
    inherited: &[RawFd],
) -> io::Result<()> {
    join_new_session_keyring()?;
    super::cgroups::join(cgroups)?;
    if let Some(plan) = as_root {
        mount_workspace(plan)?;
        become_sandbox_user(plan.max_processes)?;
    }
    for &fd in inherited {
        // SAFETY: fcntl on a descriptor the parent opened for this child.
        check(unsafe { libc::fcntl(fd, libc::F_SETFD, 0) })?;
    }
    Ok(())
}

fn join_new_session_keyring() -> io::Result<()> {
    // SAFETY: keyctl with integer arguments; a null name asks for an anonymous keyring.
    let joined = unsafe {
        libc::syscall(
            libc::SYS_keyctl,
            KEYCTL_JOIN_SESSION_KEYRING,
            std::ptr::null::<libc::c_char>(),
        )
    };
    // A kernel without keyrings has none of codemode's to share.
    if joined < 0 && io::Error::last_os_error().raw_os_error() != Some(libc::ENOSYS) {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Mounts the workspace, idmapped, `nosuid` and `nodev`, on the stage directory, in a mount
/// namespace of this child's own (its mounts never reach codemode's).
fn mount_workspace(plan: &AsRoot) -> io::Result<()> {
    // SAFETY: unshare and mount take flags and NUL-terminated strings that live across the
    // calls; open_tree, mount_setattr and move_mount read the parent's buffers and a
    // structure on this frame; the tree's descriptor is closed on every path out.
    unsafe {
        check(libc::unshare(libc::CLONE_NEWNS))?;
        check(libc::mount(
            c"none".as_ptr(),
            c"/".as_ptr(),
            std::ptr::null(),
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        ))?;
        let tree = libc::syscall(
            libc::SYS_open_tree,
            libc::AT_FDCWD,
            plan.workspace.as_ptr(),
            OPEN_TREE_CLONE | libc::O_CLOEXEC as libc::c_uint,
        );
        if tree < 0 {
            return Err(io::Error::last_os_error());
        }
        let tree = tree as RawFd;
        let attr = MountAttr {
            attr_set: MOUNT_ATTR_IDMAP | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
            attr_clr: 0,
            propagation: 0,
            userns_fd: plan.idmap.as_raw_fd() as u64,
        };
        let mut result = libc::syscall(
            libc::SYS_mount_setattr,
            tree,
            c"".as_ptr(),
            libc::AT_EMPTY_PATH,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        );
        if result == 0 {
            result = libc::syscall(
                libc::SYS_move_mount,
                tree,
                c"".as_ptr(),
                libc::AT_FDCWD,
                plan.stage.as_ptr(),
                MOVE_MOUNT_F_EMPTY_PATH,
            );
        }
        let error = io::Error::last_os_error();
        libc::close(tree);
        if result < 0 {
            return Err(error);
        }
    }
    Ok(())
}

/// Caps the processes of the sandbox's user, then becomes it: no group, no capability left.
fn become_sandbox_user(max_processes: u64) -> io::Result<()> {
    let limit = libc::rlimit {
        rlim_cur: max_processes,
        rlim_max: max_processes,
    };
    // SAFETY: setrlimit reads one structure on this frame; the others take integers.
    unsafe {
        check(libc::setrlimit(libc::RLIMIT_NPROC, &limit))?;
        check(libc::setgroups(0, std::ptr::null()))?;
        check(libc::setresgid(SANDBOX_ID, SANDBOX_ID, SANDBOX_ID))?;
        check(libc::setresuid(SANDBOX_ID, SANDBOX_ID, SANDBOX_ID))
    }
}

fn check<T: Into<i64>>(result: T) -> io::Result<()> {
    if result.into() < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}
