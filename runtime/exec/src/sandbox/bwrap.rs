//! bubblewrap: finding it, and the arguments that build a command's confinement.

use std::ffi::OsString;
use std::os::fd::RawFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::SetupError;

/// The oldest bubblewrap with `--disable-userns`.
const MINIMUM_VERSION: (u32, u32) = (0, 8);

/// A bubblewrap found on this system.
#[derive(Clone, Debug)]
pub struct Bwrap {
    pub path: PathBuf,
    /// As `bwrap --version` says it, for the start message.
    pub version: String,
}

/// `explicit`, or `bwrap` on `PATH`, if it is recent enough.
pub fn locate(explicit: Option<&Path>) -> Result<Bwrap, SetupError> {
    let unenforceable = |reason: String| SetupError::Unenforceable { reason };
    let path = match explicit {
        Some(path) => path.to_owned(),
        None => crate::subprocess::which("bwrap").map_err(|why| {
            unenforceable(format!(
                "it is built on bubblewrap, and {why}; install it (Debian and Ubuntu: apt install bubblewrap; Fedora: dnf install bubblewrap)"
            ))
        })?,
    };
    let out = std::process::Command::new(&path)
        .arg("--version")
        .env_clear()
        .output()
        .map_err(|e| unenforceable(format!("{} cannot be run: {e}", path.display())))?;
    let said = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    let version = said
        .strip_prefix("bubblewrap ")
        .and_then(|v| {
            let mut parts = v.split('.').map(|p| p.parse::<u32>().ok());
            Some((parts.next()??, parts.next()??))
        })
        .ok_or_else(|| {
            unenforceable(format!(
                "{} is not bubblewrap (it says {said:?})",
                path.display()
            ))
        })?;
    if version < MINIMUM_VERSION {
        return Err(unenforceable(format!(
            "{said} is too old: the sandbox needs bubblewrap {}.{} or later (for --disable-userns)",
            MINIMUM_VERSION.0, MINIMUM_VERSION.1
        )));
    }
    Ok(Bwrap {
        path,
        version: said,
    })
}

/// Where things go in a command's view of the filesystem.
#[derive(Debug)]
pub struct Layout {
    /// The workspace's path, the same inside as outside.
    pub workspace: PathBuf,
    /// What is bound there: the workspace itself, or where codemode runs as root, the stage
    /// its idmapped mount is on.
    pub workspace_source: PathBuf,
    /// The private temporary directory, bound on `/tmp` and `/var/tmp`.
    pub temp: PathBuf,
    /// Directories replaced by an empty, read-only tmpfs before anything is bound beneath
    /// them: `/run`, and where codemode runs as root, `/root` and each directory on the way
    /// to the workspace that the sandbox's user could not pass through.
    pub shadows: Vec<PathBuf>,
    /// Paths hidden where they exist when a command starts (where they lead, for symlinks):
    /// directories behind an empty tmpfs, files behind a node that cannot be opened.
    pub hidden: Vec<PathBuf>,
    /// Paths bound read-only where they exist, for what lies beneath a shadow.
    pub read_only: Vec<PathBuf>,
    /// Root of the command's user namespace (where codemode runs as root), or codemode's own
    /// user.
    pub as_root: bool,
    /// The user and group commands run as outside their namespace.
    pub user: (u32, u32),
}

fn arg(args: &mut Vec<OsString>, parts: &[&dyn AsRef<std::ffi::OsStr>]) {
    args.extend(parts.iter().map(|p| p.as_ref().to_owned()));
}

impl Layout {
    /// `bwrap`'s options: `cwd` inside the sandbox, `terminal` the
    /// pseudo-terminal it runs on, `filters` the descriptors of its seccomp programs.
    pub fn arguments(
        &self,
        cwd: &Path,
        terminal: Option<&Path>,
        filters: &[RawFd],
    ) -> Vec<OsString> {
        let mut args: Vec<OsString> = [
            "--unshare-user",
            "--unshare-ipc",
            "--unshare-pid",
            "--unshare-net",
            "--unshare-uts",
            "--unshare-cgroup-try",
            "--disable-userns",
            "--die-with-parent",
            "--cap-drop",
            "ALL",
            "--hostname",
            "codemode-sandbox",
            "--ro-bind",
            "/",
            "/",
            "--proc",
            "/proc",
            "--dev",
            "/dev",
        ]
        .iter()
        .map(OsString::from)
        .collect();
        if self.as_root {
            arg(&mut args, &[&"--uid", &"0", &"--gid", &"0"]);
        }
        if let Some(terminal) = terminal {
            // The command's own devpts cannot hold codemode's terminal: a tmpfs in its place
            // holds that terminal alone, so `tty` names it as the shell sees it.
            arg(&mut args, &[&"--tmpfs", &"/dev/pts"]);
            arg(&mut args, &[&"--dev-bind", &terminal, &terminal]);
        }
        for shadow in &self.shadows {
            arg(&mut args, &[&"--tmpfs", shadow]);
        }
        // The temporary directory first: a workspace beneath /tmp is bound over it.
        arg(&mut args, &[&"--bind", &self.temp, &"/tmp"]);
        if Path::new("/var/tmp").is_dir() {
            arg(&mut args, &[&"--bind", &self.temp, &"/var/tmp"]);
        }
        arg(
            &mut args,
            &[&"--bind", &self.workspace_source, &self.workspace],
        );
        // Where it leads: a symlink's target is what a command would read through it.
        for path in self.hidden.iter().filter_map(|p| p.canonicalize().ok()) {
            if self.shadowed(&path) {
                continue;
            }
            match std::fs::metadata(&path) {
                Ok(meta) if meta.is_dir() => {
                    arg(&mut args, &[&"--tmpfs", &path, &"--remount-ro", &path]);
                }
                // Bound without device access, the node cannot be opened.
                Ok(_) => arg(&mut args, &[&"--ro-bind", &"/dev/null", &path]),
                Err(_) => {}
            }
        }
        for path in self.read_only.iter().filter_map(|p| p.canonicalize().ok()) {
            arg(&mut args, &[&"--ro-bind", &path, &path]);
        }
        for shadow in &self.shadows {
            arg(&mut args, &[&"--remount-ro", shadow]);
        }
        arg(&mut args, &[&"--chdir", &cwd]);
        for fd in filters {
            arg(&mut args, &[&"--add-seccomp-fd", &fd.to_string()]);
        }
        args
    }

    /// Whether `path` is out of sight already: beneath a shadow or the private temporary
    /// directory's mounts and not in the workspace, which is bound over them; or beneath a
    /// directory the sandbox's user cannot pass through.
    fn shadowed(&self, path: &Path) -> bool {
        if path.starts_with(&self.workspace) {
            return false;
        }
        ["/tmp", "/var/tmp"]
            .iter()
            .map(Path::new)
            .chain(self.shadows.iter().map(PathBuf::as_path))
            .any(|covered| path.starts_with(covered))
            || !impassable_ancestors(path, self.user.0, self.user.1).is_empty()
    }
}

/// The directories on the way to `target` (itself excluded) that `uid`/`gid` could not pass
/// through, outermost first.
pub fn impassable_ancestors(target: &Path, uid: u32, gid: u32) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for ancestor in target.ancestors().skip(1) {
        if ancestor == Path::new("/") {
            continue;
        }
        let Ok(meta) = std::fs::metadata(ancestor) else {
            continue;
        };
        let mode = meta.mode();
        let passable = if meta.uid() == uid {
            mode & 0o100 != 0
        } else if meta.gid() == gid {
            mode & 0o010 != 0
        } else {
            mode & 0o001 != 0
        };
        if !passable {
            found.push(ancestor.to_owned());
        }
    }
    found.reverse();
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_closed_directory_on_the_way_is_found() {
        let base = tempfile::tempdir().unwrap();
        let closed = base.path().join("closed");
        let inner = closed.join("open/workspace");
        std::fs::create_dir_all(&inner).unwrap();
        let set = |p: &Path, mode| {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap()
        };
        set(&closed, 0o700);
        set(&closed.join("open"), 0o755);
        // Owned by whoever runs the test; seen from another user.
        let found = impassable_ancestors(&inner, u32::MAX - 1, u32::MAX - 1);
        assert!(found.contains(&closed), "{found:?}");
        assert!(!found.contains(&closed.join("open")), "{found:?}");
        assert!(
            impassable_ancestors(&inner, std::fs::metadata(&closed).unwrap().uid(), 0)
                .iter()
                .all(|p| p != &closed)
        );
    }
}
