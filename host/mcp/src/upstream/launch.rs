//! Which program an upstream server is, and where it starts.
//!
//! codemode's current directory is usually the workspace, which programs (and the execution
//! tools' commands) can write: a server started there, or found through it, would run whatever
//! was planted there (`./server`, a `.` entry of `PATH`, or a launcher such as `npx` that looks
//! in `./node_modules` first), with codemode's rights and outside any sandbox. So a server's
//! program is looked up only in the absolute directories of `PATH` (or taken as an absolute
//! path), and it starts in a directory of codemode's own, `<cache dir>/upstream/<NAME>`,
//! private to the user, unless its configuration names one (`cwd`).

use std::ffi::OsStr;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The file `program` names: an absolute path as it is, a bare name looked up in the absolute
/// directories of `path` (the server's `PATH`). Relative directories of `PATH` (`.`, an empty
/// entry, `node_modules/.bin`) are skipped: they mean the current directory.
pub(super) fn resolve(program: &str, path: Option<&OsStr>) -> std::io::Result<PathBuf> {
    let as_given = Path::new(program);
    if as_given.is_absolute() {
        return Ok(as_given.to_owned());
    }
    let not_found = |why: &str| std::io::Error::new(std::io::ErrorKind::NotFound, why.to_owned());
    if program.is_empty() || program.contains('/') {
        // `spec` refuses these before anything starts; kept total here.
        return Err(not_found(
            "a relative path; give an absolute path or a program name found on PATH",
        ));
    }
    let found = path
        .map(std::env::split_paths)
        .into_iter()
        .flatten()
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(program))
        .find(|candidate| is_executable(candidate));
    found.ok_or_else(|| {
        not_found("not found in the absolute directories of PATH (relative ones, such as `.`, are not searched)")
    })
}

fn is_executable(path: &Path) -> bool {
    std::fs::metadata(path)
        .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
}

/// The directory server `name` starts in when its configuration names none: made if missing
/// (`0700`), and used only while it and `upstream/` above it belong to this user and no one
/// else can write them. Without a cache directory (no `CODEMODE_CACHE_DIR`, `XDG_CACHE_HOME`
/// or `HOME`), the root directory.
pub(super) fn working_dir(name: &str) -> std::io::Result<PathBuf> {
    let Some(cache) = codemode_host::cache_dir() else {
        return Ok(PathBuf::from("/"));
    };
    let upstream = cache.join("upstream");
    let dir = upstream.join(name);
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)
        .map_err(|e| {
            std::io::Error::new(
                e.kind(),
                format!("cannot make its working directory {}: {e}", dir.display()),
            )
        })?;
    for checked in [&upstream, &dir] {
        private(checked)?;
    }
    Ok(dir)
}

/// Refuses `dir` unless it is a directory of this user's that no one else can write: whoever
/// could write it could plant what a server started there runs.
fn private(dir: &Path) -> std::io::Result<()> {
    let meta = std::fs::symlink_metadata(dir).map_err(|e| {
        std::io::Error::new(
            e.kind(),
            format!("cannot read its working directory {}: {e}", dir.display()),
        )
    })?;
    let me = codemode_durable::euid();
    let problem = if !meta.is_dir() {
        Some("it is not a directory".to_owned())
    } else if meta.uid() != me {
        Some(format!(
            "it belongs to uid {}, not to the user codemode runs as (uid {me})",
            meta.uid()
        ))
    } else if meta.mode() & 0o022 != 0 {
        Some(format!(
            "it has mode {:04o}: others can write it (`chmod 700 {}`)",
            meta.mode() & 0o7777,
            dir.display()
        ))
    } else {
        None
    };
    match problem {
        None => Ok(()),
        Some(problem) => Err(std::io::Error::new(
            std::io::ErrorKind::PermissionDenied,
            format!(
                "its working directory {} is not private: {problem}",
                dir.display()
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use std::ffi::OsString;

    use super::*;

    #[test]
    fn programs_are_found_only_in_absolute_directories_of_path() {
        let sh = resolve("sh", Some(OsStr::new("relative:/usr/bin:/bin"))).unwrap();
        assert!(sh.is_absolute() && sh.ends_with("sh"), "{}", sh.display());
        assert!(resolve("sh", Some(OsStr::new(".:bin:usr/bin:"))).is_err());
        assert!(resolve("sh", None).is_err());
        assert!(resolve("./sh", Some(OsStr::new("/bin"))).is_err());
        assert!(resolve("bin/sh", Some(OsStr::new("/"))).is_err());
        assert_eq!(resolve("/bin/sh", None).unwrap(), PathBuf::from("/bin/sh"));
        // A directory or a file that is not executable is not a program.
        assert!(resolve("bin", Some(&OsString::from("/"))).is_err());
        assert!(resolve("passwd", Some(&OsString::from("/etc"))).is_err());
    }
}
