//! The directories a sandbox makes in the system's temporary directory, how they are removed,
//! and what is left of them when the process that made them dies without removing them.
//!
//! A sandbox removes its private temporary directory (every command's `/tmp`, holding whatever
//! its commands wrote there) and, as root, its workspace stage when it is dropped. Commands fill
//! the temporary directory as they like, as deep as they like, so it is removed by `rm -rf` run
//! as the user its contents belong to (the sandbox's user, where codemode runs as root): a
//! removal that recursed in this process could run out of descriptors or overflow its stack on
//! a deep enough tree, and one run as root could be turned by a swapped entry against files
//! that user could not delete. The stage is only ever an empty mount point here, and is removed
//! only if empty.
//!
//! A process killed outright (SIGKILL, the OOM killer, an abort) removes nothing, and the files
//! a client's commands left would stay on the disk for good. So each directory is held: its
//! maker keeps it open under an exclusive `flock` for as long as it lives, and the kernel lets
//! go of the lock whatever way the process ends. Whenever a sandbox is made, it first removes
//! every directory of these names that no one holds: one whose maker is gone. On one machine a
//! lock works across processes, users and PID namespaces, where a pid would not say who is
//! alive; where the filesystem takes no lock, directories are made unheld and none is swept.
//!
//! Only directories named as this module names them are candidates, and only those owned by
//! this process's user (or, where it runs as root, by the sandbox's user, to whom the temporary
//! directory is given): a directory planted by anyone else is left alone, a symbolic link is
//! never followed, and nothing is swept from a temporary directory others may write to without
//! the sticky bit (where anyone could swap its entries).

use std::fs;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::SetupError;

/// The names of a sandbox's private temporary directory and of its workspace stage, followed
/// by random characters.
pub const TEMP_PREFIX: &str = "codemode-sandbox-tmp-";
pub const STAGE_PREFIX: &str = "codemode-sandbox-stage-";

/// How a directory is removed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Removal {
    /// With all it holds, by `rm -rf` run as this user and group (see the module's note).
    Tree { uid: u32, gid: u32 },
    /// Only if it is empty.
    Empty,
}

/// A private directory made in the system's temporary directory, held for as long as this
/// value lives and removed as [`Removal`] says when it is dropped.
#[derive(Debug)]
pub struct HeldDir {
    path: PathBuf,
    removal: Removal,
    // `None` where the filesystem takes no lock.
    lock: Option<OwnedFd>,
}

impl HeldDir {
    /// A new directory named `prefix` and random characters in `base`, mode 0700, held, to be
    /// removed as `removal` says.
    pub fn new(base: &Path, prefix: &str, removal: Removal) -> Result<Self, SetupError> {
        let failed = |source| SetupError::TempDir {
            path: base.to_owned(),
            source,
        };
        loop {
            let path = tempfile::Builder::new()
                .prefix(prefix)
                .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700))
                .tempdir_in(base)
                .map_err(failed)?
                .keep();
            // A sweep by another process may take the directory between its making and its
            // locking (it is not held yet): the lock is then on a directory no longer there,
            // and another name is tried.
            let lock = match open_directory(&path) {
                Ok(lock) => lock,
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                Err(e) => {
                    let _ = fs::remove_dir(&path);
                    return Err(failed(e));
                }
            };
            let lock = match flock(&lock, libc::LOCK_EX) {
                Ok(()) if metadata_of(&lock).is_some_and(|held| names(&path, &held)) => Some(lock),
                // Swept and perhaps made again by someone else: not ours to remove.
                Ok(()) => continue,
                // No lock on this filesystem: no sweep can take it either.
                Err(_) => None,
            };
            return Ok(Self {
                path,
                removal,
                lock,
            });
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for HeldDir {
    fn drop(&mut self) {
        // Removed while still held, so that no sweep races the removal.
        remove(&self.path, self.removal);
        drop(self.lock.take());
    }
}

/// Removes `path` as `removal` says; best effort.
fn remove(path: &Path, removal: Removal) {
    if let Removal::Tree { uid, gid } = removal {
        remove_tree(path, uid, gid);
    }
    // An empty directory the tree's user could not remove (one never given to it) goes too.
    let _ = fs::remove_dir(path);
}

/// `rm -rf path` as `uid`/`gid`, waited for: removes a tree of any depth without recursing in
/// this process, and as its owner, who can delete nothing there that was not theirs to.
fn remove_tree(path: &Path, uid: u32, gid: u32) {
    let Some(rm) = ["/usr/bin/rm", "/bin/rm"]
        .into_iter()
        .map(Path::new)
        .find(|rm| rm.is_file())
    else {
        tracing::warn!(
            "no rm to remove {} with: it is left in place",
            path.display()
        );
        return;
    };
    let mut command = Command::new(rm);
    command
        .args(["-rf", "--"])
        .arg(path)
        .env_clear()
        .current_dir("/")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // SAFETY: geteuid and getegid only return this process's ids.
    let (own_uid, own_gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    if (uid, gid) != (own_uid, own_gid) {
        command.uid(uid).gid(gid);
    }
    match command.status() {
        Ok(status) if status.success() => {}
        Ok(status) => tracing::warn!("removing {} failed: rm {status}", path.display()),
        Err(e) => tracing::warn!("removing {} failed: {e}", path.display()),
    }
}

/// Removes the directories in `base` named by [`TEMP_PREFIX`] or [`STAGE_PREFIX`], owned by
/// one of `owners`, that no process holds: a temporary directory as its owner (with
/// [`Removal::Tree`]), a stage only if empty. Best effort: what cannot be read, locked or
/// removed is left as it is, and nothing is swept from a `base` that others may write to
/// without the sticky bit. Returns the directories removed.
pub fn sweep(base: &Path, owners: &[u32]) -> Vec<PathBuf> {
    let Ok(meta) = fs::metadata(base) else {
        return Vec::new();
    };
    if meta.mode() & 0o002 != 0 && meta.mode() & 0o1000 == 0 {
        return Vec::new();
    }
    let Ok(entries) = fs::read_dir(base) else {
        return Vec::new();
    };
    let mut removed = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else {
            continue;
        };
        let stage = name.starts_with(STAGE_PREFIX);
        if !(stage || name.starts_with(TEMP_PREFIX)) {
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
        if flock(&lock, libc::LOCK_EX | libc::LOCK_NB).is_err() {
            continue;
        }
        // What is locked is what was looked at, and what the path still names.
        let unchanged = metadata_of(&lock).is_some_and(|held| {
            held.dev() == found.dev()
                && held.ino() == found.ino()
                && held.uid() == found.uid()
                && names(&path, &held)
        });
        if !unchanged {
            continue;
        }
        // Held by this sweep while it removes, so its maker's protocol sees it gone if it was
        // just made.
        let removal = if stage {
            Removal::Empty
        } else {
            Removal::Tree {
                uid: found.uid(),
                gid: found.gid(),
            }
        };
        remove(&path, removal);
        if fs::symlink_metadata(&path).is_err() {
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

/// The metadata of the file `fd` is open on.
fn metadata_of(fd: &OwnedFd) -> Option<fs::Metadata> {
    fs::File::from(fd.try_clone().ok()?).metadata().ok()
}

/// Whether `path` names the file `held` describes now (not one removed and made again there).
fn names(path: &Path, held: &fs::Metadata) -> bool {
    fs::symlink_metadata(path)
        .is_ok_and(|there| there.dev() == held.dev() && there.ino() == held.ino())
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn own() -> (u32, u32) {
        // SAFETY: geteuid and getegid only return this process's ids.
        unsafe { (libc::geteuid(), libc::getegid()) }
    }

    fn as_self() -> Removal {
        let (uid, gid) = own();
        Removal::Tree { uid, gid }
    }

    /// A base like the system's temporary directory: sticky.
    fn base() -> tempfile::TempDir {
        let base = tempfile::tempdir().expect("a temporary directory");
        std::fs::set_permissions(base.path(), std::fs::Permissions::from_mode(0o1777))
            .expect("made sticky");
        base
    }

    /// What a killed process leaves: a directory of the name no one holds.
    fn left(base: &Path, prefix: &str) -> PathBuf {
        let path = base.join(format!("{prefix}left"));
        std::fs::create_dir(&path).expect("made");
        path
    }

    /// Deeper than a removal holding a descriptor a level could go: past this process's limit
    /// of open files (at most 70,000 levels, to bound the test's time).
    fn too_deep() -> usize {
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit writes the limit into the struct it is given.
        let read = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0;
        let open_files = if read { limit.rlim_cur } else { 1024 };
        usize::try_from(open_files).map_or(70_000, |n| n.saturating_add(100).min(70_000))
    }

    /// `depth` directories nested in `dir`, made relative to each other (the path of the
    /// deepest is far past PATH_MAX).
    fn nest(dir: &Path, depth: usize) {
        let mut at = open_directory(dir).expect("opened");
        for _ in 0..depth {
            let name = c"d";
            // SAFETY: a descriptor this test owns and a NUL-terminated name.
            assert_eq!(
                unsafe { libc::mkdirat(at.as_raw_fd(), name.as_ptr(), 0o700) },
                0
            );
            // SAFETY: as above; the new descriptor is owned at once.
            let next = unsafe {
                libc::openat(
                    at.as_raw_fd(),
                    name.as_ptr(),
                    libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
                )
            };
            assert!(next >= 0);
            // SAFETY: `next` was just opened and nothing else owns it.
            at = unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(next) };
        }
    }

    #[test]
    fn a_held_directory_is_not_swept_and_goes_when_dropped_however_deep() {
        let base = base();
        let held = HeldDir::new(base.path(), TEMP_PREFIX, as_self()).expect("made");
        std::fs::write(held.path().join("file"), "kept").expect("written");
        assert!(sweep(base.path(), &[own().0]).is_empty());
        assert!(held.path().join("file").exists());
        nest(held.path(), too_deep());
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
        let left = left(base.path(), TEMP_PREFIX);
        std::fs::create_dir(left.join("nested")).expect("made");
        std::fs::write(left.join("nested/secret"), "a client's").expect("written");
        std::os::unix::fs::symlink(&outside, left.join("link")).expect("linked");
        nest(&left, too_deep());
        let held = HeldDir::new(base.path(), TEMP_PREFIX, as_self()).expect("made");
        assert_eq!(sweep(base.path(), &[own().0]), vec![left.clone()]);
        assert!(!left.exists());
        assert!(held.path().exists());
        assert_eq!(
            std::fs::read_to_string(outside.join("keep")).expect("read"),
            "untouched"
        );
    }

    #[test]
    fn a_stage_is_removed_only_when_empty() {
        let base = base();
        let empty = left(base.path(), STAGE_PREFIX);
        assert_eq!(sweep(base.path(), &[own().0]), vec![empty.clone()]);
        let full = left(base.path(), STAGE_PREFIX);
        std::fs::write(full.join("file"), "not a stage's").expect("written");
        assert!(sweep(base.path(), &[own().0]).is_empty());
        assert!(full.join("file").exists());
        let held = HeldDir::new(base.path(), STAGE_PREFIX, Removal::Empty).expect("made");
        let path = held.path().to_owned();
        drop(held);
        assert!(!path.exists());
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
        let unheld = left(base.path(), TEMP_PREFIX);
        // Someone else's directory of the name is not this process's to remove.
        assert!(sweep(base.path(), &[own().0.wrapping_add(1)]).is_empty());
        assert!(unheld.exists());
        // Nor is anything in a base anyone may write to without the sticky bit.
        std::fs::set_permissions(base.path(), std::fs::Permissions::from_mode(0o777))
            .expect("made writable by all");
        assert!(sweep(base.path(), &[own().0]).is_empty());
        std::fs::set_permissions(base.path(), std::fs::Permissions::from_mode(0o1777))
            .expect("made sticky");
        assert_eq!(sweep(base.path(), &[own().0]), vec![unheld.clone()]);
        assert!(other.exists() && target.exists() && link.exists());
    }

    #[test]
    fn the_sandbox_user_is_an_owner_only_for_root() {
        assert_eq!(owners(true, 0, 65534), vec![0, 65534]);
        assert_eq!(owners(false, 1000, 65534), vec![1000]);
    }
}
