//! The local state directory, trusted only when it is the user's own and used only through
//! the descriptors that were checked.
//!
//! Whoever can write the state directory can replace its key and forge paused runs, which a
//! resume then runs with the resuming process's tools and rights (root's, when root resumes).
//! So a directory of the store is used only when it belongs to this process's effective user
//! and neither its group nor others can write it; the key file only when it is the user's and
//! no one else has any access to it. Every check reads the metadata of the descriptor that is
//! then used (`fstat`), and every name inside the directory is reached from that descriptor
//! (`openat`, `renameat`, …) with `O_NOFOLLOW`: a path swapped after the check, or a symlink
//! planted at a name, changes nothing.

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// The effective user id of this process: the user the state store must belong to.
pub fn euid() -> u32 {
    // SAFETY: geteuid takes no arguments, touches no memory and always succeeds (POSIX).
    unsafe { libc::geteuid() }
}

/// Who may do what to a file or directory of the store.
#[derive(Clone, Copy)]
pub enum Access {
    /// No one but the owner may write it (directories, records): mode bits `022` clear.
    OwnerWrites,
    /// No one but the owner may do anything with it (the key): mode bits `077` clear.
    OwnerOnly,
}

/// Refuses `meta` unless it belongs to this process's user and `access` holds. `what` names
/// it ("the state directory", "the state key", …) in the message, which says how to fix it.
pub fn check_owned(
    meta: &std::fs::Metadata,
    path: &Path,
    what: &str,
    access: Access,
) -> Result<(), String> {
    let me = euid();
    let path = path.display();
    if meta.uid() != me {
        return Err(format!(
            "{what} {path} belongs to uid {}, not to the user codemode runs as (uid {me}): its \
             owner could put a key or records there and forge paused runs that a resume would \
             run. Use a state directory of your own (--state DIR or CODEMODE_STATE_DIR); if this \
             one is yours, take it back with `chown {me} {path}`",
            meta.uid()
        ));
    }
    let mode = meta.mode() & 0o7777;
    let (forbidden, can, fix) = match access {
        Access::OwnerWrites if meta.is_dir() => (0o022, "write", "700"),
        Access::OwnerWrites => (0o022, "write", "600"),
        Access::OwnerOnly => (0o077, "read or write", "600"),
    };
    if mode & forbidden != 0 {
        let who = match (mode & forbidden & 0o070 != 0, mode & forbidden & 0o007 != 0) {
            (true, true) => "its group and others",
            (true, false) => "its group",
            _ => "others",
        };
        return Err(format!(
            "{what} {path} has mode {mode:04o}: {who} can {can} it, and so forge paused runs \
             that a resume would run. Make it private with `chmod {fix} {path}`"
        ));
    }
    Ok(())
}

/// A regular file of a store directory, as [`PrivateDir::files`] lists it.
#[derive(Debug, Clone)]
pub struct Listed {
    pub name: String,
    pub modified: SystemTime,
    pub bytes: u64,
}

/// A directory of the store, open and checked: owned by the user, written by no one else.
#[derive(Debug)]
pub struct PrivateDir {
    /// The directory's descriptor (`metadata` is `fstat`, `sync_all` is `fsync`).
    file: File,
    path: PathBuf,
}

/// A name inside a store directory as C needs it. The names are the store's own (run ids,
/// which are hex, and fixed suffixes); anything that could leave the directory is refused.
fn c_name(name: &str) -> io::Result<CString> {
    if name.is_empty() || name == "." || name == ".." || name.contains('/') {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{name:?} is not a file name"),
        ));
    }
    CString::new(name).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{name:?} holds a NUL byte"),
        )
    })
}

/// A system call's `-1` as the error it set, retried on `EINTR`.
fn retry(mut call: impl FnMut() -> libc::c_int) -> io::Result<libc::c_int> {
    loop {
        let ret = call();
        if ret != -1 {
            return Ok(ret);
        }
        let error = io::Error::last_os_error();
        if error.kind() != io::ErrorKind::Interrupted {
            return Err(error);
        }
    }
}

impl PrivateDir {
    /// The state directory at `path`, checked; `None` when it does not exist and `create` is
    /// false. With `create`, a missing directory (and its missing parents) is made `0700`.
    pub fn open(path: &Path, create: bool) -> Result<Option<Self>, String> {
        if create {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(path)
                .map_err(|e| {
                    format!("cannot create the state directory {}: {e}", path.display())
                })?;
        }
        // The path itself may be a symlink (a state directory kept elsewhere): what it leads
        // to is what is checked and then used, through this descriptor.
        let file = match std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECTORY)
            .open(path)
        {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound && !create => return Ok(None),
            Err(e) => {
                return Err(format!(
                    "cannot open the state directory {}: {e}",
                    path.display()
                ))
            }
        };
        let dir = Self {
            file,
            path: path.to_owned(),
        };
        dir.check("the state directory")?;
        Ok(Some(dir))
    }

    fn check(&self, what: &str) -> Result<(), String> {
        let meta = self
            .file
            .metadata()
            .map_err(|e| format!("cannot read {what} {}: {e}", self.path.display()))?;
        if !meta.is_dir() {
            return Err(format!("{what} {} is not a directory", self.path.display()));
        }
        check_owned(&meta, &self.path, what, Access::OwnerWrites)
    }

    /// Where `name` is, for messages.
    pub fn path(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }

    /// The subdirectory `name`, checked as the state directory is; `None` when it does not
    /// exist and `create` is false. A missing one is made `0700` with `create`.
    pub fn sub(&self, name: &str, create: bool) -> Result<Option<Self>, String> {
        let path = self.path(name);
        let what = "the state store's directory";
        if create {
            match self.mkdir(name) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(format!("cannot create {}: {e}", path.display())),
            }
        }
        let file = match self.open_at(name, libc::O_RDONLY | libc::O_DIRECTORY, 0) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound && !create => return Ok(None),
            Err(e) => {
                // O_DIRECTORY | O_NOFOLLOW meets a symlink with ENOTDIR.
                let why = if e.raw_os_error() == Some(libc::ENOTDIR) {
                    "it is not a directory (a symbolic link is not followed there)".to_owned()
                } else {
                    why(&e)
                };
                return Err(format!("cannot open {what} {}: {why}", path.display()));
            }
        };
        let dir = Self { file, path };
        dir.check(what)?;
        Ok(Some(dir))
    }

    fn mkdir(&self, name: &str) -> io::Result<()> {
        let c = c_name(name)?;
        // SAFETY: the descriptor is open for as long as `self` lives and `c` is a
        // NUL-terminated string that outlives the call.
        retry(|| unsafe { libc::mkdirat(self.file.as_raw_fd(), c.as_ptr(), 0o700) }).map(drop)
    }

    /// Opens `name` in this directory with `flags` (plus close-on-exec and no-follow: a
    /// symlink at the name is an error, `ELOOP`), creating it with `mode` where `flags` say.
    fn open_at(&self, name: &str, flags: libc::c_int, mode: libc::mode_t) -> io::Result<File> {
        let c = c_name(name)?;
        let flags = flags | libc::O_CLOEXEC | libc::O_NOFOLLOW;
        // SAFETY: the descriptor is open for as long as `self` lives, `c` is a NUL-terminated
        // string that outlives the call, and openat reads its variadic mode as an unsigned int.
        let fd = retry(|| unsafe {
            libc::openat(
                self.file.as_raw_fd(),
                c.as_ptr(),
                flags,
                libc::c_uint::from(mode),
            )
        })?;
        // SAFETY: openat just returned this descriptor; nothing else owns it.
        Ok(File::from(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    /// Opens the existing file `name` for reading, without following a symlink and without
    /// blocking on a FIFO planted at the name. The caller checks what it opened.
    pub fn open_read(&self, name: &str) -> io::Result<File> {
        self.open_at(name, libc::O_RDONLY | libc::O_NONBLOCK, 0)
    }

    /// Creates `name` for writing with `mode`; fails if anything is there already.
    pub fn create_new(&self, name: &str, mode: libc::mode_t) -> io::Result<File> {
        self.open_at(name, libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL, mode)
    }

    /// Whether anything (a file, a directory, a symlink) is at `name`.
    pub fn exists(&self, name: &str) -> io::Result<bool> {
        Ok(self.stat(name)?.is_some())
    }

    /// When the regular file `name` was last written; `None` when nothing is there, or
    /// something other than a regular file (a symlink is not followed).
    pub fn modified(&self, name: &str) -> io::Result<Option<SystemTime>> {
        Ok(self.regular(name)?.map(|(at, _)| at))
    }

    /// When the regular file `name` was last written and its size; `None` when nothing is
    /// there, or something other than a regular file (a symlink is not followed).
    fn regular(&self, name: &str) -> io::Result<Option<(SystemTime, u64)>> {
        let Some(stat) = self.stat(name)? else {
            return Ok(None);
        };
        if stat.st_mode & libc::S_IFMT != libc::S_IFREG {
            return Ok(None);
        }
        let since_epoch = Duration::new(
            u64::try_from(stat.st_mtime).unwrap_or(0),
            u32::try_from(stat.st_mtime_nsec).unwrap_or(0),
        );
        let bytes = u64::try_from(stat.st_size).unwrap_or(0);
        Ok(Some((SystemTime::UNIX_EPOCH + since_epoch, bytes)))
    }

    /// The regular files in this directory with when each was last written and its size.
    /// Names are listed from the path and each is then read from the descriptor, so a name
    /// listed from a directory swapped in at the path is only ever looked up (and found or
    /// not) here.
    pub fn files(&self) -> io::Result<Vec<Listed>> {
        let mut files = Vec::new();
        for entry in std::fs::read_dir(&self.path)? {
            let Ok(name) = entry?.file_name().into_string() else {
                continue;
            };
            match self.regular(&name) {
                Ok(Some((modified, bytes))) => files.push(Listed {
                    name,
                    modified,
                    bytes,
                }),
                // Gone since it was listed, or not a file the store would have written.
                Ok(None) => {}
                Err(e) if e.kind() == io::ErrorKind::InvalidInput => {}
                Err(e) => return Err(e),
            }
        }
        Ok(files)
    }

    /// The names in this directory, unchecked: for counting what the caller then looks up
    /// elsewhere, never for opening.
    pub fn names(&self) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in std::fs::read_dir(&self.path)? {
            if let Ok(name) = entry?.file_name().into_string() {
                names.push(name);
            }
        }
        Ok(names)
    }

    /// What is at `name`, not following a symlink; `None` when nothing is.
    fn stat(&self, name: &str) -> io::Result<Option<libc::stat>> {
        let c = c_name(name)?;
        let mut stat = std::mem::MaybeUninit::<libc::stat>::uninit();
        // SAFETY: the descriptor is open for as long as `self` lives, `c` is a NUL-terminated
        // string that outlives the call, and `stat` is writable memory of the type fstatat
        // fills.
        let found = retry(|| unsafe {
            libc::fstatat(
                self.file.as_raw_fd(),
                c.as_ptr(),
                stat.as_mut_ptr(),
                libc::AT_SYMLINK_NOFOLLOW,
            )
        });
        match found {
            // SAFETY: fstatat returned 0, so it filled `stat` whole.
            Ok(_) => Ok(Some(unsafe { stat.assume_init() })),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Renames `from` to `to`, both in this directory (atomically replacing `to`).
    pub fn rename(&self, from: &str, to: &str) -> io::Result<()> {
        let (from, to) = (c_name(from)?, c_name(to)?);
        let fd = self.file.as_raw_fd();
        // SAFETY: the descriptor is open for as long as `self` lives and both names are
        // NUL-terminated strings that outlive the call.
        retry(|| unsafe { libc::renameat(fd, from.as_ptr(), fd, to.as_ptr()) }).map(drop)
    }

    /// Links `to` to the file `from` (not following a symlink); fails if `to` exists.
    pub fn link(&self, from: &str, to: &str) -> io::Result<()> {
        let (from, to) = (c_name(from)?, c_name(to)?);
        let fd = self.file.as_raw_fd();
        // SAFETY: the descriptor is open for as long as `self` lives and both names are
        // NUL-terminated strings that outlive the call.
        retry(|| unsafe { libc::linkat(fd, from.as_ptr(), fd, to.as_ptr(), 0) }).map(drop)
    }

    /// Removes the file `name`.
    pub fn remove(&self, name: &str) -> io::Result<()> {
        let c = c_name(name)?;
        // SAFETY: the descriptor is open for as long as `self` lives and `c` is a
        // NUL-terminated string that outlives the call.
        retry(|| unsafe { libc::unlinkat(self.file.as_raw_fd(), c.as_ptr(), 0) }).map(drop)
    }

    /// Makes the directory's entries durable (after a create, rename or removal).
    pub fn sync(&self) -> io::Result<()> {
        self.file.sync_all()
    }
}

/// An error opening a name, said plainly where the plain words are known.
pub fn why(error: &io::Error) -> String {
    if error.raw_os_error() == Some(libc::ELOOP) {
        "it is a symbolic link, which codemode does not follow there".to_owned()
    } else {
        error.to_string()
    }
}

/// Checks the regular file `file` (opened from `dir` as `name`) is the user's own under
/// `access`, and returns its size.
pub fn checked_file(
    file: &File,
    dir: &PrivateDir,
    name: &str,
    what: &str,
    access: Access,
) -> Result<u64, String> {
    let path = dir.path(name);
    let meta = file
        .metadata()
        .map_err(|e| format!("cannot read {what} {}: {e}", path.display()))?;
    if !meta.is_file() {
        return Err(format!("{what} {} is not a regular file", path.display()));
    }
    check_owned(&meta, &path, what, access)?;
    Ok(meta.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("codemode-private-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn a_directory_others_can_write_is_refused_and_a_private_one_is_used() {
        let path = scratch("modes");
        let dir = PrivateDir::open(&path, true).unwrap().unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700, "created private");
        assert!(dir.sub("runs", true).unwrap().is_some());
        assert!(dir.sub("absent", false).unwrap().is_none());
        for (mode, who) in [
            (0o777, "its group and others"),
            (0o720, "its group"),
            (0o702, "others"),
        ] {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
            let refused = PrivateDir::open(&path, false).unwrap_err();
            assert!(refused.contains(&path.display().to_string()), "{refused}");
            assert!(refused.contains(who), "{refused}");
            assert!(refused.contains("chmod 700"), "{refused}");
        }
        // Readable is fine: only writing lets anyone replace what is there.
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert!(PrivateDir::open(&path, false).unwrap().is_some());
        // A subdirectory too, and one that is a symlink is not followed.
        std::fs::set_permissions(path.join("runs"), std::fs::Permissions::from_mode(0o777))
            .unwrap();
        let refused = dir.sub("runs", false).unwrap_err();
        let runs = path.join("runs");
        assert!(
            refused.contains(&format!("the state store's directory {}", runs.display())),
            "{refused}"
        );
        std::os::unix::fs::symlink("/tmp", path.join("linked")).unwrap();
        let refused = dir.sub("linked", false).unwrap_err();
        assert!(refused.contains("symbolic link"), "{refused}");
        assert!(dir.exists("linked").unwrap());
        assert!(!dir.exists("nothing").unwrap());
        assert!(dir.open_read("../etc/passwd").is_err());
        let _ = std::fs::remove_dir_all(&path);
    }
}
