//! The user namespace an idmapped mount of the workspace is made with, where codemode runs as
//! root: its map takes the workspace's owner (user and group) to the sandbox's user, so that
//! through the mount the sandbox sees the workspace as its own and what it writes there is
//! owned by the workspace's owner on disk, while the sandbox's processes run as the
//! unprivileged [`SANDBOX_ID`](super::child::SANDBOX_ID) everywhere else.
//!
//! A namespace is made by a throwaway process that unshares one and waits; this process writes
//! its maps, keeps a descriptor of it, and lets the process go.

use std::io::Write;
use std::os::fd::OwnedFd;
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};

use super::child::SANDBOX_ID;

/// A descriptor of a user namespace mapping `workspace`'s owner to the sandbox's user.
pub fn namespace_for(workspace: &Path) -> Result<OwnedFd, String> {
    let owner = std::fs::metadata(workspace)
        .map_err(|e| format!("cannot read the workspace's owner: {e}"))?;
    let cat = crate::subprocess::which("cat")?;
    let mut holder = Command::new(cat);
    holder
        .env_clear()
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // SAFETY: between fork and exec the closure makes one system call with a flag.
    unsafe {
        holder.pre_exec(|| {
            if libc::unshare(libc::CLONE_NEWUSER) == 0 {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        });
    }
    let mut holder = holder
        .spawn()
        .map_err(|e| format!("cannot make a user namespace: {e}"))?;
    let pid = holder.id();
    let made = (|| {
        let proc = Path::new("/proc").join(pid.to_string());
        write(&proc.join("uid_map"), owner.uid())?;
        write(&proc.join("gid_map"), owner.gid())?;
        std::fs::File::open(proc.join("ns/user"))
            .map(OwnedFd::from)
            .map_err(|e| format!("cannot open the user namespace: {e}"))
    })();
    // Closing its input ends the holder; the namespace lives on through the descriptor.
    drop(holder.stdin.take());
    let _ = holder.wait();
    made
}

fn write(map: &Path, id: u32) -> Result<(), String> {
    std::fs::OpenOptions::new()
        .write(true)
        .open(map)
        .and_then(|mut file| file.write_all(format!("{id} {SANDBOX_ID} 1\n").as_bytes()))
        .map_err(|e| format!("cannot write {}: {e}", map.display()))
}
