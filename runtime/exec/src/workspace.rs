//! The workspace commands run in, and the working directories a call may ask for: relative to
//! the workspace and never outside it.
//!
//! A `workdir` is opened beneath the workspace's directory handle (`cap-std`), so `..`,
//! absolute paths and symlinks that lead out are refused by construction; the child then
//! changes into that open handle (`/proc/self/fd/N`), so a path swapped after the check
//! cannot move it elsewhere.

use std::os::fd::AsRawFd;
use std::path::{Component, Path, PathBuf};

use cap_std::ambient_authority;
use cap_std::fs::Dir;

use crate::SetupError;

pub struct Workspace {
    root: PathBuf,
}

/// An open working directory beneath the workspace; keep it until the child has started.
pub struct WorkDir {
    dir: Dir,
}

impl WorkDir {
    /// The path the child changes into: the open handle itself.
    pub fn child_path(&self) -> PathBuf {
        PathBuf::from(format!("/proc/self/fd/{}", self.dir.as_raw_fd()))
    }
}

/// The workspace's canonical path, or why it cannot be used.
pub(crate) fn resolve(root: &Path) -> Result<PathBuf, SetupError> {
    root.canonicalize().map_err(|source| SetupError::Workspace {
        path: root.to_owned(),
        source,
    })
}

impl Workspace {
    pub fn new(root: &Path) -> Result<Self, SetupError> {
        let root = resolve(root)?;
        if !root.is_dir() {
            return Err(SetupError::NotADirectory { path: root });
        }
        Ok(Self { root })
    }

    /// Opens `workdir` (the workspace itself when `None` or empty).
    pub(crate) fn open(&self, workdir: Option<&str>) -> Result<WorkDir, String> {
        let root = Dir::open_ambient_dir(&self.root, ambient_authority())
            .map_err(|e| format!("cannot open the workspace {}: {e}", self.root.display()))?;
        let workdir = workdir.unwrap_or("");
        if workdir.is_empty() || workdir == "." {
            return Ok(WorkDir { dir: root });
        }
        let path = Path::new(workdir);
        if path.is_absolute() {
            return Err(format!(
                "workdir {workdir:?} is absolute; give a path relative to the workspace"
            ));
        }
        if path.components().any(|c| c == Component::ParentDir) {
            return Err(format!(
                "workdir {workdir:?} goes up with `..`; give a path inside the workspace"
            ));
        }
        let dir = root.open_dir(path).map_err(|e| {
            format!("workdir {workdir:?} is not a directory inside the workspace ({e})")
        })?;
        Ok(WorkDir { dir })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_are_refused_and_subdirectories_open() {
        let base = std::env::temp_dir().join(format!("codemode-ws-{}", std::process::id()));
        let root = base.join("root");
        std::fs::create_dir_all(root.join("sub")).unwrap();
        std::fs::create_dir_all(base.join("outside")).unwrap();
        let _ = std::fs::remove_file(root.join("out"));
        std::os::unix::fs::symlink(base.join("outside"), root.join("out")).unwrap();
        let ws = Workspace::new(&root).unwrap();
        assert!(ws.open(None).is_ok());
        assert!(ws.open(Some("sub")).is_ok());
        for bad in ["/tmp", "..", "sub/../..", "out", "missing"] {
            assert!(ws.open(Some(bad)).is_err(), "{bad}");
        }
        std::fs::remove_dir_all(&base).unwrap();
    }
}
