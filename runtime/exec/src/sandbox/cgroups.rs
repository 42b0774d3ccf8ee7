//! A cgroup of its own for each command, where codemode runs as root and can write the
//! kernel's cgroups: `pids.max` and a memory limit over the command's whole tree, whatever
//! namespaces or sessions it makes. cgroup v2 where codemode's own cgroup already hands the
//! `pids` and `memory` controllers down to its children (as a container's delegated root
//! does), else the v1 `pids` and `memory` hierarchies. Elsewhere there are none, and the
//! sandbox's start message says so.
//!
//! The child joins its cgroups between fork and exec (writing `0` to each `cgroup.procs`,
//! through descriptors the parent opened), before it gives up root; when the command is
//! over, whatever is left in them is killed and they are removed.

use std::fs;
use std::io::{self, Write};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// What a command's cgroup allows.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub processes: u64,
    pub memory_bytes: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Version {
    V1,
    V2,
}

/// A cgroup commands' cgroups are made in, and which limits it takes.
#[derive(Debug)]
struct Place {
    dir: PathBuf,
    version: Version,
    pids: bool,
    memory: bool,
}

/// Where commands' cgroups go on this system.
#[derive(Debug)]
pub struct Cgroups {
    places: Vec<Place>,
}

impl Cgroups {
    /// The places where commands' cgroups can be made, each tried once; `None` where there
    /// are none that hold both limits.
    pub fn detect() -> Option<Self> {
        let membership = fs::read_to_string("/proc/self/cgroup").ok()?;
        let mounts = fs::read_to_string("/proc/self/mountinfo").ok()?;
        let places = v2(&membership, &mounts)
            .map(|place| vec![place])
            .or_else(|| v1(&membership, &mounts))?;
        for place in &places {
            let swept = sweep(&place.dir);
            if swept > 0 {
                tracing::info!(
                    "removed {swept} empty cgroups in {} left by processes that ended without removing them",
                    place.dir.display()
                );
            }
        }
        let cgroups = Self { places };
        // A cgroup made and removed: the directories are writable and the limits taken.
        drop(
            cgroups
                .enter(Limits {
                    processes: 64,
                    memory_bytes: 64 << 20,
                })
                .ok()?,
        );
        Some(cgroups)
    }

    /// Which version and controllers, for the start message.
    pub fn describe(&self) -> String {
        match self.places.first().map(|p| p.version) {
            Some(Version::V2) => "cgroup v2".to_owned(),
            _ => "cgroup v1 (pids, memory)".to_owned(),
        }
    }

    /// A new cgroup in every place, with `limits` written; the child joins it through
    /// [`Membership::join_fds`].
    pub fn enter(&self, limits: Limits) -> io::Result<Membership> {
        // A name can be taken: a process that exited before its cgroups were removed (their
        // removal runs on a thread of its own) leaves them behind, and in a container the next
        // process may get its pid. Such a name is passed over for the next one.
        let mut tries = 0;
        loop {
            match self.enter_as(&fresh_name(), limits) {
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists && tries < 64 => tries += 1,
                entered => return entered,
            }
        }
    }

    fn enter_as(&self, name: &str, limits: Limits) -> io::Result<Membership> {
        let mut membership = Membership {
            dirs: Vec::new(),
            procs: Vec::new(),
        };
        for place in &self.places {
            let dir = place.dir.join(name);
            fs::create_dir(&dir)?;
            membership.dirs.push(dir.clone());
            if place.pids {
                write(&dir.join("pids.max"), limits.processes)?;
            }
            if place.memory {
                let file = match place.version {
                    Version::V2 => "memory.max",
                    Version::V1 => "memory.limit_in_bytes",
                };
                write(&dir.join(file), limits.memory_bytes)?;
            }
            let procs = fs::OpenOptions::new()
                .write(true)
                .custom_flags(libc::O_CLOEXEC)
                .open(dir.join("cgroup.procs"))?;
            membership.procs.push(OwnedFd::from(procs));
        }
        Ok(membership)
    }
}

static NEXT: AtomicU64 = AtomicU64::new(0);

/// A cgroup name no earlier call of this process used.
fn fresh_name() -> String {
    format!(
        "codemode-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// Removes the cgroups in `dir` named as [`fresh_name`] names them whose process has ended (a
/// process killed outright cannot remove its own), and returns how many. Only an empty cgroup
/// can be removed, so nothing that still runs is touched; a cgroup of a live process is left
/// even when empty, since it may be about to be joined. A process in another PID namespace
/// that shares this place cannot be told alive here: an empty cgroup of its, removed before its
/// command joined it, fails that command's start, and no command runs outside its limits.
fn sweep(dir: &Path) -> usize {
    let Ok(entries) = fs::read_dir(dir) else {
        return 0;
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(owner_of) else {
            continue;
        };
        if !has_ended(pid) {
            continue;
        }
        if fs::remove_dir(entry.path()).is_ok() {
            removed += 1;
        }
    }
    removed
}

/// The pid in a name [`fresh_name`] made: `codemode-<pid>-<n>`.
fn owner_of(name: &str) -> Option<i32> {
    let (pid, n) = name.strip_prefix("codemode-")?.split_once('-')?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(pid) || !digits(n) {
        return None;
    }
    pid.parse().ok().filter(|pid| *pid > 0)
}

/// Whether no process `pid` exists (in this PID namespace).
fn has_ended(pid: i32) -> bool {
    // SAFETY: signal 0 only asks whether the process exists; nothing is sent.
    let answer = unsafe { libc::kill(pid, 0) };
    answer != 0 && io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH)
}

fn write(file: &Path, value: u64) -> io::Result<()> {
    fs::OpenOptions::new()
        .write(true)
        .open(file)?
        .write_all(value.to_string().as_bytes())
}

/// cgroup v2, where codemode's cgroup already enables both controllers for its children.
fn v2(membership: &str, mounts: &str) -> Option<Place> {
    let path = membership.lines().find_map(|l| l.strip_prefix("0::"))?;
    let dir = mount_of(mounts, "cgroup2", None, path)?;
    let enabled = fs::read_to_string(dir.join("cgroup.subtree_control")).ok()?;
    let enabled: Vec<&str> = enabled.split_whitespace().collect();
    (enabled.contains(&"pids") && enabled.contains(&"memory")).then_some(Place {
        dir,
        version: Version::V2,
        pids: true,
        memory: true,
    })
}

/// The v1 `pids` and `memory` hierarchies, where codemode's cgroup in each is writable.
fn v1(membership: &str, mounts: &str) -> Option<Vec<Place>> {
    let mut places = Vec::new();
    for controller in ["pids", "memory"] {
        let path = membership.lines().find_map(|line| {
            let mut fields = line.splitn(3, ':');
            let (_, controllers, path) = (fields.next()?, fields.next()?, fields.next()?);
            controllers
                .split(',')
                .any(|c| c == controller)
                .then_some(path)
        })?;
        let dir = mount_of(mounts, "cgroup", Some(controller), path)?;
        places.push(Place {
            dir,
            version: Version::V1,
            pids: controller == "pids",
            memory: controller == "memory",
        });
    }
    Some(places)
}

/// Where `path` (as `/proc/self/cgroup` names it) lies in this mount namespace: the mount of
/// type `kind` (holding `controller`), joined with what of `path` lies beneath the mount's
/// own root.
fn mount_of(mounts: &str, kind: &str, controller: Option<&str>, path: &str) -> Option<PathBuf> {
    mounts.lines().find_map(|line| {
        // ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - TYPE SOURCE SUPER_OPTIONS
        let (before, after) = line.split_once(" - ")?;
        let fields: Vec<&str> = before.split(' ').collect();
        let (root, point) = (fields.get(3)?, fields.get(4)?);
        let mut after = after.split(' ');
        if after.next()? != kind {
            return None;
        }
        let options = after.nth(1)?;
        if let Some(controller) = controller {
            if !options.split(',').any(|o| o == controller) {
                return None;
            }
        }
        let beneath = Path::new(path).strip_prefix(root).ok()?;
        Some(Path::new(point).join(beneath))
    })
}

/// A command's cgroups, removed (with whatever still runs in them) when dropped.
pub struct Membership {
    dirs: Vec<PathBuf>,
    procs: Vec<OwnedFd>,
}

impl Membership {
    /// The `cgroup.procs` descriptors the child writes `0` to.
    pub fn join_fds(&self) -> Vec<RawFd> {
        self.procs.iter().map(AsRawFd::as_raw_fd).collect()
    }
}

impl Drop for Membership {
    fn drop(&mut self) {
        let mut dirs = std::mem::take(&mut self.dirs);
        // Most are empty by now, and removing them here leaves none behind when the process
        // exits next.
        dirs.retain(|dir| fs::remove_dir(dir).is_err() && dir.exists());
        if dirs.is_empty() {
            return;
        }
        // The command has ended, but the kernel may still be tearing its namespace down: a
        // thread of its own waits for the cgroups to empty rather than the caller.
        let _ = std::thread::Builder::new()
            .name("codemode-cgroup".into())
            .spawn(move || {
                for dir in dirs.iter().rev() {
                    remove(dir);
                }
            });
    }
}

/// Kills what is left in `dir` and removes it, for up to a few seconds.
fn remove(dir: &Path) {
    for _ in 0..200 {
        if fs::remove_dir(dir).is_ok() || !dir.exists() {
            return;
        }
        if fs::write(dir.join("cgroup.kill"), "1").is_err() {
            for pid in fs::read_to_string(dir.join("cgroup.procs"))
                .unwrap_or_default()
                .lines()
                .filter_map(|p| p.parse::<i32>().ok())
            {
                // SAFETY: kill takes integers; the pid was in this command's cgroup.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    tracing::warn!(
        "the cgroup {} of a sandboxed command could not be removed",
        dir.display()
    );
}

/// Joins the cgroups behind `fds`: called between fork and exec, one write each.
pub fn join(fds: &[RawFd]) -> io::Result<()> {
    for &fd in fds {
        // SAFETY: a write of one byte from a static buffer to a descriptor the parent opened.
        if unsafe { libc::write(fd, b"0".as_ptr().cast(), 1) } != 1 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cgroups_are_found_where_the_mounts_put_them() {
        let membership = "4:memory:/process_api/abc\n8:pids:/\n0::/\n";
        let mounts = "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n\
                      39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids\n\
                      41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";
        let places = v1(membership, mounts).expect("both controllers");
        assert_eq!(places[0].dir, Path::new("/sys/fs/cgroup/pids/"));
        assert_eq!(
            places[1].dir,
            Path::new("/sys/fs/cgroup/memory/process_api/abc")
        );
        // A container's view: the mount's root is its own cgroup.
        let inside = "0::/\n";
        let mounts = "50 40 0:30 /docker/xyz /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n";
        assert_eq!(
            mount_of(mounts, "cgroup2", None, "/docker/xyz/sub"),
            Some(PathBuf::from("/sys/fs/cgroup/sub"))
        );
        assert!(v2(inside, mounts).is_none(), "no subtree control file here");
    }

    #[test]
    fn a_name_left_behind_by_an_earlier_process_is_passed_over() {
        // Where this machine gives no cgroups there is nothing to collide with.
        let Some(cgroups) = Cgroups::detect() else {
            return;
        };
        let next = NEXT.load(Ordering::Relaxed);
        let left: Vec<PathBuf> = (next..next + 8)
            .flat_map(|n| {
                let name = format!("codemode-{}-{n}", std::process::id());
                cgroups.places.iter().map(move |p| p.dir.join(&name))
            })
            .filter(|dir| fs::create_dir(dir).is_ok())
            .collect();
        let entered = cgroups.enter(Limits {
            processes: 8,
            memory_bytes: 16 << 20,
        });
        for dir in &left {
            let _ = fs::remove_dir(dir);
        }
        let membership = entered.expect("a free name is found");
        assert!(membership.dirs.iter().all(|d| !left.contains(d)));
    }

    /// A pid no process has: one that ran and was reaped.
    fn ended_pid() -> i32 {
        let mut child = std::process::Command::new("true").spawn().expect("runs");
        let pid = i32::try_from(child.id()).expect("a pid");
        child.wait().expect("reaped");
        pid
    }

    #[test]
    fn empty_cgroups_of_ended_processes_are_swept_and_nothing_else() {
        // A directory stands for the place: removing an empty one is what the kernel allows.
        let place = tempfile::tempdir().expect("a temporary directory");
        let ended = ended_pid();
        let own = std::process::id();
        let made = |name: String| {
            let dir = place.path().join(name);
            fs::create_dir(&dir).expect("made");
            dir
        };
        let left = [
            made(format!("codemode-{ended}-0")),
            made(format!("codemode-{ended}-7")),
        ];
        let live = made(format!("codemode-{own}-0"));
        let busy = made(format!("codemode-{ended}-1"));
        fs::create_dir(busy.join("child")).expect("made");
        let others = [
            made(format!("codemode-{ended}")),
            made(format!("codemode-{ended}-x")),
            made(format!("other-{ended}-0")),
            made("codemode--0".to_owned()),
        ];
        assert_eq!(sweep(place.path()), 2);
        assert!(left.iter().all(|d| !d.exists()));
        assert!(live.exists() && busy.exists());
        assert!(others.iter().all(|d| d.exists()));
    }

    #[test]
    fn names_say_their_process() {
        assert_eq!(owner_of("codemode-123-4"), Some(123));
        assert_eq!(owner_of("codemode-0-4"), None);
        assert_eq!(owner_of("codemode-99999999999-4"), None);
        assert_eq!(owner_of("codemode-12-"), None);
        assert_eq!(owner_of("codemode-+12-3"), None);
        assert!(!has_ended(
            i32::try_from(std::process::id()).expect("a pid")
        ));
        assert!(has_ended(ended_pid()));
    }
}
