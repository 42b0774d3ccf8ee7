//! What a sandboxed command's process does to itself between fork and exec, in this order:
//! namespaces (user, hostname, network, IPC), every capability dropped, `no_new_privs`, the
//! seccomp filter, the Landlock domain, and every descriptor above 2 marked close-on-exec.
//!
//! Everything here runs in the child of a fork of a multi-threaded process, so it may only
//! make system calls: every buffer it writes from is prepared by the parent, and no step
//! allocates (`io::Error::last_os_error` and `from_raw_os_error` do not).

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;

use seccompiler::BpfProgram;

/// The namespaces a command gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Namespaces {
    /// A user namespace of its own (mapping only codemode's own user and group), with its own
    /// hostname, network and IPC: capabilities inside it are worth nothing outside.
    User,
    /// Hostname, network and IPC of its own, without a user namespace (root where user
    /// namespaces are disabled).
    Isolated,
    /// None: the kernel lets this process create none.
    Shared,
}

/// Everything the child needs, prepared by the parent.
pub struct Plan {
    /// Open (close-on-exec) for as long as a plan that names it exists.
    ruleset: Arc<OwnedFd>,
    namespaces: Namespaces,
    seccomp: Option<BpfProgram>,
    uid_map: Vec<u8>,
    gid_map: Vec<u8>,
}

impl Plan {
    pub fn new(ruleset: Arc<OwnedFd>, namespaces: Namespaces, seccomp: Option<BpfProgram>) -> Self {
        // SAFETY: geteuid and getegid only return this process's ids.
        let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
        Self {
            ruleset,
            namespaces,
            seccomp,
            uid_map: format!("{uid} {uid} 1\n").into_bytes(),
            gid_map: format!("{gid} {gid} 1\n").into_bytes(),
        }
    }

    /// Confines the calling process. Called only between fork and exec.
    pub fn apply(&self) -> io::Result<()> {
        self.enter_namespaces()?;
        drop_capabilities()?;
        // SAFETY: prctl with integer arguments reads no memory.
        check(unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) })?;
        if let Some(filter) = &self.seccomp {
            // The filter was compiled by the parent; applying it is two system calls.
            seccompiler::apply_filter(filter)
                .map_err(|_| io::Error::from_raw_os_error(libc::EPERM))?;
        }
        let ruleset = self.ruleset.as_raw_fd();
        // SAFETY: the ruleset descriptor stays open until exec (it is close-on-exec).
        check(unsafe { libc::syscall(libc::SYS_landlock_restrict_self, ruleset, 0u32) })?;
        crate::descriptors::close_on_exec_above_stdio()
    }

    fn enter_namespaces(&self) -> io::Result<()> {
        const PRIVATE: libc::c_int = libc::CLONE_NEWUTS | libc::CLONE_NEWNET | libc::CLONE_NEWIPC;
        match self.namespaces {
            Namespaces::Shared => Ok(()),
            // SAFETY: unshare takes only flags.
            Namespaces::Isolated => check(unsafe { libc::unshare(PRIVATE) }),
            Namespaces::User => {
                // SAFETY: unshare takes only flags.
                check(unsafe { libc::unshare(libc::CLONE_NEWUSER | PRIVATE) })?;
                write_proc(c"/proc/self/setgroups", b"deny")?;
                write_proc(c"/proc/self/uid_map", &self.uid_map)?;
                write_proc(c"/proc/self/gid_map", &self.gid_map)
            }
        }
    }
}

fn check<T: Into<i64>>(result: T) -> io::Result<()> {
    if result.into() < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

fn write_proc(path: &CStr, content: &[u8]) -> io::Result<()> {
    // SAFETY: `path` is NUL-terminated; the descriptor is closed on every path out.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let written = libc::write(fd, content.as_ptr().cast(), content.len());
        let error = io::Error::last_os_error();
        libc::close(fd);
        if written < 0 {
            return Err(error);
        }
        if written as usize != content.len() {
            return Err(io::Error::from_raw_os_error(libc::EIO));
        }
    }
    Ok(())
}

const CAPABILITY_VERSION_3: u32 = 0x2008_0522;
const CAP_SETPCAP: u32 = 8;
// <linux/securebits.h>: root gains nothing at exec, uid changes keep nothing, no ambient
// raising, each locked.
const SECURE_BITS: libc::c_ulong = 0b1110_1111;

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: libc::c_int,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// Empties the bounding, ambient, effective, permitted and inheritable sets, and locks the
/// secure bits so that executing a program as root grants nothing back.
fn drop_capabilities() -> io::Result<()> {
    let mut header = CapHeader {
        version: CAPABILITY_VERSION_3,
        pid: 0,
    };
    let mut data = [CapData::default(); 2];
    // SAFETY: the header and the two data words are valid for the kernel to write.
    check(unsafe { libc::syscall(libc::SYS_capget, &mut header, data.as_mut_ptr()) })?;
    if data[0].effective & (1 << CAP_SETPCAP) != 0 {
        // SAFETY: prctl with integer arguments reads no memory.
        unsafe {
            check(libc::prctl(libc::PR_SET_SECUREBITS, SECURE_BITS, 0, 0, 0))?;
            let mut cap: libc::c_ulong = 0;
            // The kernel refuses the first number past its last capability.
            while libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) == 0 {
                cap += 1;
            }
            if io::Error::last_os_error().raw_os_error() != Some(libc::EINVAL) {
                return Err(io::Error::last_os_error());
            }
        }
    }
    // Without CAP_SETPCAP there is nothing to drop from the bounding set that could be
    // regained: `no_new_privs` follows, and this process holds no capability after capset.
    // SAFETY: prctl with integer arguments reads no memory.
    check(unsafe {
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL,
            0,
            0,
            0,
        )
    })?;
    let empty = [CapData::default(); 2];
    // SAFETY: the header and the two data words are valid for the kernel to read.
    check(unsafe { libc::syscall(libc::SYS_capset, &mut header, empty.as_ptr()) })
}
