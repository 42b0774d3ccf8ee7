//! The directories a sandbox makes in the system's temporary directory, and what is left of
//! them when the process that made them dies without removing them.
//!
//! A sandbox removes its private temporary directory (every command's `/tmp`, holding whatever
//! its commands wrote there) and, as root, its workspace stage when it is dropped. A process
//! killed outright (SIGKILL, the OOM killer, an abort) cannot, and the files a client's
//! commands left would stay on the disk for good. So each directory is held: its maker keeps
//! it open under an exclusive `flock` for as long as it lives, and the kernel lets go of the
//! lock whatever way the process ends. Whenever a sandbox is made, it first removes every
//! directory of these names that no one holds: one whose maker is gone. A lock works across
//! processes, users and PID namespaces, where a pid would not say who is alive.
//!
//! Only directories named as this module names them are candidates, and only those owned by
//! this process's user (or, where it runs as root, by the sandbox's user, to whom the temporary
//! directory is given): a directory planted by anyone else is left alone, and a symbolic link
//! is never followed.

use std::fs;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use crate::SetupError;

/// The names of a sandbox's private temporary directory and of its workspace stage, followed
/// by random characters.
pub const TEMP_PREFIX: &str = "codemode-sandbox-tmp-";
pub const STAGE_PREFIX: &str = "codemode-sandbox-stage-";

/// A private directory made in the system's temporary directory, held for as long as this
/// value lives and removed with what it holds when it is dropped.
#[derive(Debug)]
pub struct HeldDir {
    // Dropped first: the directory goes before the lock that says someone holds it.
    dir: tempfile::TempDir,
    _lock: OwnedFd,
}

impl HeldDir {
    /// A new directory named `prefix` and random characters in `base`, mode 0700, held.
    pub fn new(base: &Path, prefix: &str) -> Result<Self, SetupError> {
        let failed = |source| SetupError::TempDir {
            path: base.to_owned(),
            source,
        };
        loop {
            let dir = tempfile::Builder::new()
                .prefix(prefix)
                .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700))
                .tempdir_in(base)
                .map_err(failed)?;
            // A sweep by another process may take the directory between its making and its
            // locking (it is not held yet): the lock is then on a directory no longer there,
            // and another name is tried.
            let lock = match open_directory(dir.path()) {
                Ok(lock) => lock,
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    let _ = dir.keep();
                    continue;
                }
                Err(e) => return Err(failed(e)),
            };
            flock(&lock, libc::LOCK_EX).map_err(failed)?;
            if same_file(&lock, dir.path()) {
                return Ok(Self { dir, _lock: lock });
            }
            // Swept and perhaps made again by someone else: not ours to remove.
            let _ = dir.keep();
        }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

/// Removes the directories in `base` named by [`TEMP_PREFIX`] or [`STAGE_PREFIX`], owned by
/// one of `owners`, that no process holds. Best effort: what cannot be read, locked or
/// removed is left as it is. Returns the directories removed.
pub fn sweep(base: &Path, owners: &[u32]) -> Vec<PathBuf> {
    let Ok(entries) = fs::read_dir(base) else {
        return Vec::new();
    };
    let mut removed = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else {
            continue;
        };
        if !(name.starts_with(TEMP_PREFIX) || name.starts_with(STAGE_PREFIX)) {
            continue;
        }
        let path = entry.path();
        // Not followed: a symbolic link of the name is not a directory here.
        let Ok(found) = fs::symlink_metadata(&path) else {
            continue;
        };
        if !found.is_dir() || !owners.contains(&found.uid()) {
            continue;
        }
        let Ok(lock) = open_directory(&path) else {
            continue;
        };
        if flock(&lock, libc::LOCK_EX | libc::LOCK_NB).is_err() || !same_file(&lock, &path) {
            continue;
        }
        // Held by this sweep now, so its maker's protocol sees it gone if it was just made.
        if fs::remove_dir_all(&path).is_ok() {
            removed.push(path);
        }
    }
    removed
}

/// The users whose directories a sandbox made by this process may have left: its own, and
/// where it runs as root, the sandbox's user's too.
pub fn owners(root: bool, own: u32, sandbox: u32) -> Vec<u32> {
    if root {
        vec![own, sandbox]
    } else {
        vec![own]
    }
}

fn open_directory(path: &Path) -> io::Result<OwnedFd> {
    fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .map(OwnedFd::from)
}

fn flock(fd: &OwnedFd, operation: libc::c_int) -> io::Result<()> {
    loop {
        // SAFETY: flock takes an open descriptor, which `fd` owns, and an operation.
        if unsafe { libc::flock(fd.as_raw_fd(), operation) } == 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Whether `fd` is the directory at `path` now (not one removed and made again there).
fn same_file(fd: &OwnedFd, path: &Path) -> bool {
    let held = fs::File::from(match fd.try_clone() {
        Ok(fd) => fd,
        Err(_) => return false,
    })
    .metadata();
    match (held, fs::symlink_metadata(path)) {
        (Ok(held), Ok(there)) => held.dev() == there.dev() && held.ino() == there.ino(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn own_uid() -> u32 {
        // SAFETY: geteuid only returns this process's id.
        unsafe { libc::geteuid() }
    }

    fn base() -> tempfile::TempDir {
        tempfile::tempdir().expect("a temporary directory")
    }

    #[test]
    fn a_held_directory_is_not_swept_and_goes_when_dropped() {
        let base = base();
        let held = HeldDir::new(base.path(), TEMP_PREFIX).expect("made");
        std::fs::write(held.path().join("file"), "kept").expect("written");
        assert!(sweep(base.path(), &[own_uid()]).is_empty());
        assert!(held.path().join("file").exists());
        let path = held.path().to_owned();
        drop(held);
        assert!(!path.exists());
    }

    #[test]
    fn a_directory_whose_holder_is_gone_is_swept_with_what_it_holds() {
        let base = base();
        let outside = base.path().join("outside");
        std::fs::create_dir(&outside).expect("made");
        std::fs::write(outside.join("keep"), "untouched").expect("written");
        // What a killed process leaves: the directory, no one holding it.
        let HeldDir { dir, _lock } = HeldDir::new(base.path(), STAGE_PREFIX).expect("made");
        let left = dir.keep();
        drop(_lock);
        std::fs::create_dir(left.join("nested")).expect("made");
        std::fs::write(left.join("nested/secret"), "a client's").expect("written");
        std::os::unix::fs::symlink(&outside, left.join("link")).expect("linked");
        let held = HeldDir::new(base.path(), TEMP_PREFIX).expect("made");
        assert_eq!(sweep(base.path(), &[own_uid()]), vec![left.clone()]);
        assert!(!left.exists());
        assert!(held.path().exists());
        assert_eq!(
            std::fs::read_to_string(outside.join("keep")).expect("read"),
            "untouched"
        );
    }

    #[test]
    fn only_directories_of_its_names_and_owners_are_candidates() {
        let base = base();
        let other = base.path().join("codemode-other-dir");
        std::fs::create_dir(&other).expect("made");
        let target = base.path().join("target");
        std::fs::create_dir(&target).expect("made");
        let link = base.path().join(format!("{TEMP_PREFIX}link"));
        std::os::unix::fs::symlink(&target, &link).expect("linked");
        let unheld = base.path().join(format!("{TEMP_PREFIX}unheld"));
        std::fs::create_dir(&unheld).expect("made");
        // Someone else's directory of the name is not this process's to remove.
        assert!(sweep(base.path(), &[own_uid().wrapping_add(1)]).is_empty());
        assert!(unheld.exists());
        assert_eq!(sweep(base.path(), &[own_uid()]), vec![unheld.clone()]);
        assert!(other.exists() && target.exists() && link.exists());
    }

    #[test]
    fn the_sandbox_user_is_an_owner_only_for_root() {
        assert_eq!(owners(true, 0, 65534), vec![0, 65534]);
        assert_eq!(owners(false, 1000, 65534), vec![1000]);
    }
}
