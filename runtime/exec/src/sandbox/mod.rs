//! The `sandbox` backend: every command runs in a confinement of its own, built by bubblewrap
//! (`bwrap`, the isolation layer Flatpak and many build tools use, packaged by every major
//! distribution), with its own view of the filesystem and its own process tree:
//! - mounts (`bwrap.rs`): the system read-only, `nosuid` and `nodev`; the workspace and a
//!   private temporary directory (`/tmp`, `/var/tmp`) the only places it may write, `nosuid`
//!   and `nodev` too; a fresh `/proc`, a minimal `/dev` with pseudo-terminals of its own, an
//!   empty `/run`; codemode's own files and the user's credentials hidden;
//! - a PID namespace: the command's tree is all it sees, and when the command ends, or its
//!   call, job, terminal or session, or codemode itself, every process in it ends too;
//! - a user namespace: the command is root of its own namespace only, with no capability and
//!   no way to make another namespace; where codemode runs as root, that root is the
//!   unprivileged `nobody` outside and the workspace is mounted through an idmapping
//!   (`child.rs`, `idmap.rs`), so that it owns nothing outside but the workspace's files, and
//!   the processes of every sandboxed command together are capped;
//! - an empty network namespace, IPC and a hostname of its own;
//! - seccomp programs (`filter.rs`): sockets of the `AF_UNIX`, `AF_INET` and `AF_INET6`
//!   families only, no set-user-id or set-group-id bit on any file, no keyrings, no io_uring;
//! - where codemode runs as root and can write the kernel's cgroups, a cgroup per command
//!   (`cgroups.rs`) capping its processes and memory;
//! - a fresh session keyring, every signal at its default action, no descriptor but 0–2, and
//!   a short environment.
//!
//! A system that cannot give all of this (no bubblewrap, user namespaces turned off, a
//! workspace whose filesystem cannot be idmapped) is refused when the backend is created,
//! with what is missing; commands never run with less.

mod bwrap;
mod cgroups;
mod child;
mod filter;
mod idmap;
mod leftovers;

use std::ffi::{CString, OsString};
use std::io::{Read, Seek, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::backend::{Backend, Launch};
use crate::subprocess::Spawn;
use crate::SetupError;
pub use child::SANDBOX_ID;

/// How a sandbox is set up beyond its workspace.
#[derive(Clone, Debug)]
pub struct SandboxOptions {
    /// Environment variables passed to commands besides the defaults (`PATH`, `HOME`, `LANG`,
    /// `LANGUAGE`, `LC_*`, `TERM`, `USER`, and `TMPDIR`, which is `/tmp`). codemode's own
    /// secrets are refused.
    pub pass_env: Vec<String>,
    /// Paths commands must not see besides [`default_hidden`]: codemode's own files (its
    /// state directory, token file, module cache and configuration) and whatever the user
    /// adds.
    pub hide: Vec<PathBuf>,
    /// Paths commands may read that the sandbox would otherwise leave out (a toolchain in
    /// root's home, where codemode runs as root).
    pub read_only: Vec<PathBuf>,
    /// Where codemode runs as root: the most processes every sandboxed command together may
    /// run at once, and, where cgroups allow, each command.
    pub max_processes: u64,
    /// Where codemode runs as root and cgroups allow: the most memory the processes of one
    /// command may use together.
    pub max_memory_bytes: u64,
    /// The bubblewrap to use; `bwrap` on `PATH` when `None`.
    pub bwrap: Option<PathBuf>,
}

impl Default for SandboxOptions {
    fn default() -> Self {
        Self {
            pass_env: Vec::new(),
            hide: Vec::new(),
            read_only: Vec::new(),
            max_processes: 1024,
            max_memory_bytes: 4 << 30,
            bwrap: None,
        }
    }
}

/// Credentials a build tool in a workspace has no use for: beneath the home directory, and
/// the files the cloud tools' variables name.
pub fn default_hidden() -> Vec<PathBuf> {
    const IN_HOME: &[&str] = &[
        ".aws",
        ".azure",
        ".cargo/credentials",
        ".cargo/credentials.toml",
        ".config/gcloud",
        ".config/gh",
        ".docker",
        ".git-credentials",
        ".gnupg",
        ".kube",
        ".local/share/keyrings",
        ".netrc",
        ".npmrc",
        ".pypirc",
        ".ssh",
    ];
    const NAMED_BY: &[&str] = &[
        "AWS_SHARED_CREDENTIALS_FILE",
        "AWS_CONFIG_FILE",
        "GOOGLE_APPLICATION_CREDENTIALS",
        "KUBECONFIG",
    ];
    let mut paths: Vec<PathBuf> = std::env::var_os("HOME")
        .filter(|home| !home.is_empty())
        .map(|home| IN_HOME.iter().map(|p| Path::new(&home).join(p)).collect())
        .unwrap_or_default();
    paths.extend(
        NAMED_BY
            .iter()
            .filter_map(std::env::var_os)
            .flat_map(|value| std::env::split_paths(&value).collect::<Vec<_>>())
            .filter(|path| path.is_absolute()),
    );
    paths
}

/// What the sandbox enforces, as found when it was created.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Protections {
    /// The bubblewrap that builds it, as it names itself.
    pub bubblewrap: String,
    /// The user commands run as outside their namespace.
    pub outside_user: u32,
    /// Whether the workspace is mounted through an idmapping (codemode runs as root).
    pub idmapped_workspace: bool,
    /// The cap on the processes of every sandboxed command together, where there is one.
    pub process_limit: Option<u64>,
    /// The cgroups that hold each command, where there are: which kind, and the limits.
    pub cgroups: Option<String>,
    /// How many paths are hidden where they exist.
    pub hidden: usize,
}

impl std::fmt::Display for Protections {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: own mount, PID, user, network, IPC and hostname namespaces; the system read-only (nosuid, nodev); writable only the workspace and a private /tmp; ",
            self.bubblewrap
        )?;
        if self.idmapped_workspace {
            write!(
                f,
                "commands are root of their own user namespace only, uid {} outside (the workspace idmapped to its owner); ",
                self.outside_user
            )?;
        } else {
            write!(
                f,
                "commands run as uid {} in a user namespace of their own; ",
                self.outside_user
            )?;
        }
        f.write_str("no capabilities, no further user namespaces; seccomp: AF_UNIX, AF_INET and AF_INET6 sockets only, no set-user-id or set-group-id bits, no keyrings, no io_uring; ")?;
        if let Some(limit) = self.process_limit {
            write!(f, "at most {limit} processes across every command; ")?;
        }
        match &self.cgroups {
            Some(cgroups) => write!(f, "a cgroup per command ({cgroups}); ")?,
            None => f.write_str(
                "no cgroup per command (codemode is not root, or cannot write the cgroups); ",
            )?,
        }
        write!(
            f,
            "{} paths of credentials and codemode's own files hidden",
            self.hidden
        )
    }
}

pub struct Sandbox {
    bwrap: bwrap::Bwrap,
    layout: bwrap::Layout,
    as_root: Option<Arc<child::AsRoot>>,
    cgroups: Option<(cgroups::Cgroups, cgroups::Limits)>,
    filters: Arc<Vec<Vec<u8>>>,
    pass_env: Vec<String>,
    protections: Protections,
    /// Removed with the sandbox: the private temporary directory, and where codemode runs
    /// as root, the stage the workspace is mounted on in each command's mount namespace. Held
    /// while it lives, so that the next sandbox removes them if this process is killed first
    /// (`leftovers.rs`).
    _temp: leftovers::HeldDir,
    _stage: Option<leftovers::HeldDir>,
}

impl Sandbox {
    /// Prepares the confinement for `workspace` with default options.
    pub fn new(workspace: &Path) -> Result<Self, SetupError> {
        Self::with_options(workspace, SandboxOptions::default())
    }

    /// Prepares the confinement for `workspace` and checks, with a throwaway command, that
    /// this system enforces all of it. `Err` says what is missing, or what is wrong with the
    /// options.
    pub fn with_options(workspace: &Path, options: SandboxOptions) -> Result<Self, SetupError> {
        crate::environment::check_pass_through(&options.pass_env)?;
        let bwrap = bwrap::locate(options.bwrap.as_deref())?;
        let workspace = crate::workspace::resolve(workspace)?;
        let unenforceable = |reason: String| SetupError::Unenforceable { reason };
        let filters = filter::programs().map_err(unenforceable)?;
        // SAFETY: geteuid only returns this process's id.
        let euid = unsafe { libc::geteuid() };
        let root = euid == 0;
        let base = std::env::temp_dir();
        let swept = leftovers::sweep(&base, &leftovers::owners(root, euid, SANDBOX_ID));
        if !swept.is_empty() {
            tracing::info!(
                "removed {} temporary directories left by sandboxes of processes that ended without removing them",
                swept.len()
            );
        }
        // What commands write there belongs to the sandbox's user, who removes it.
        let (uid, gid) = outside_ids(root);
        let temp = leftovers::HeldDir::new(
            &base,
            leftovers::TEMP_PREFIX,
            leftovers::Removal::Tree { uid, gid },
        )?;
        let mut shadows = vec![PathBuf::from("/run")];
        let mut hidden = default_hidden();
        hidden.extend(options.hide.iter().cloned());
        let (as_root, stage, workspace_source) = if root {
            // The sandbox's user writes its temporary directory.
            std::os::unix::fs::chown(temp.path(), Some(SANDBOX_ID), Some(SANDBOX_ID)).map_err(
                |source| SetupError::TempDir {
                    path: temp.path().to_owned(),
                    source,
                },
            )?;
            let stage =
                leftovers::HeldDir::new(&base, leftovers::STAGE_PREFIX, leftovers::Removal::Empty)?;
            let plan = child::AsRoot {
                idmap: idmap::namespace_for(&workspace).map_err(unenforceable)?,
                workspace: c_path(&workspace)?,
                stage: c_path(stage.path())?,
                max_processes: options.max_processes,
            };
            shadows.push(PathBuf::from("/root"));
            for ancestor in bwrap::impassable_ancestors(&workspace, SANDBOX_ID, SANDBOX_ID) {
                if !shadows.iter().any(|s| ancestor.starts_with(s)) {
                    shadows.push(ancestor);
                }
            }
            // Its mount shows the workspace a second time; only the workspace's own path may.
            hidden.push(stage.path().to_owned());
            let source = stage.path().to_owned();
            (Some(Arc::new(plan)), Some(stage), source)
        } else {
            (None, None, workspace.clone())
        };
        for path in [temp.path(), &workspace_source] {
            if let Some(closed) = bwrap::impassable_ancestors(path, uid, gid).first() {
                return Err(unenforceable(format!(
                    "the sandbox's user (uid {uid}) cannot reach {} through {}; set TMPDIR to a directory every user can reach",
                    path.display(),
                    closed.display()
                )));
            }
        }
        let hidden_count = hidden.len();
        let cgroups = root.then(cgroups::Cgroups::detect).flatten().map(|found| {
            let limits = cgroups::Limits {
                processes: options.max_processes,
                memory_bytes: options.max_memory_bytes,
            };
            (found, limits)
        });
        let layout = bwrap::Layout {
            workspace,
            workspace_source,
            temp: temp.path().to_owned(),
            shadows,
            hidden,
            read_only: options.read_only.clone(),
            as_root: root,
            user: (uid, gid),
        };
        let protections = Protections {
            bubblewrap: bwrap.version.clone(),
            outside_user: uid,
            idmapped_workspace: root,
            process_limit: root.then_some(options.max_processes),
            cgroups: cgroups.as_ref().map(|(found, limits)| {
                format!(
                    "{}: at most {} processes and {} MiB each",
                    found.describe(),
                    limits.processes,
                    limits.memory_bytes >> 20
                )
            }),
            hidden: hidden_count,
        };
        let sandbox = Self {
            bwrap,
            layout,
            as_root,
            cgroups,
            filters: Arc::new(filters),
            pass_env: options.pass_env,
            protections,
            _temp: temp,
            _stage: stage,
        };
        sandbox.probe()?;
        Ok(sandbox)
    }

    /// The private temporary directory, `/tmp` of every confined process.
    pub fn temp_dir(&self) -> &Path {
        &self.layout.temp
    }

    /// What this sandbox enforces.
    pub fn protections(&self) -> &Protections {
        &self.protections
    }

    /// Starts `true` the way every command starts; `Err` carries what bubblewrap or the
    /// kernel refused.
    fn probe(&self) -> Result<(), SetupError> {
        use std::os::unix::process::CommandExt;
        let spec = Spawn {
            program: Path::new("/bin/sh"),
            args: vec!["-c".into(), "exit 0".into()],
            cwd: self.layout.workspace.clone(),
            env: Vec::new(),
        };
        let failed = |why: String| SetupError::Unenforceable {
            reason: format!("a confined test command could not run: {why}"),
        };
        let launch = self.launch(&spec, None).map_err(failed)?;
        let mut command = std::process::Command::new(&launch.program);
        command
            .args(&launch.args)
            .current_dir(&launch.cwd)
            .env_clear()
            .envs(self.environment())
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped());
        if let Some(mut step) = launch.child_step {
            // SAFETY: the child step makes only system calls on what the parent prepared.
            unsafe {
                command.pre_exec(move || {
                    crate::descriptors::close_on_exec_above_stdio()?;
                    step()
                });
            }
        }
        let mut child = command.spawn().map_err(|e| {
            failed(match (&self.as_root, e.raw_os_error()) {
                (Some(_), Some(libc::EINVAL | libc::EPERM | libc::ENOSYS)) => format!(
                    "the workspace {} cannot be mounted through an idmapping ({e}); its filesystem must support idmapped mounts (ext4, xfs, btrfs, tmpfs and others do; NFS does not)",
                    self.layout.workspace.display()
                ),
                _ => e.to_string(),
            })
        })?;
        drop(launch.inherited);
        let mut said = String::new();
        if let Some(mut stderr) = child.stderr.take() {
            let _ = stderr.by_ref().take(4096).read_to_string(&mut said);
        }
        let status = child.wait().map_err(|e| failed(e.to_string()))?;
        if status.success() {
            return Ok(());
        }
        let said = said.trim();
        let hint = if said.contains("namespace") || said.contains("uid map") {
            " (user namespaces may be turned off: check the sysctls user.max_user_namespaces, kernel.unprivileged_userns_clone and kernel.apparmor_restrict_unprivileged_userns)"
        } else {
            ""
        };
        Err(failed(format!(
            "{} said {said:?} ({status}){hint}",
            self.bwrap.path.display()
        )))
    }
}

/// The user and group commands run as outside their namespace.
fn outside_ids(root: bool) -> (u32, u32) {
    if root {
        (SANDBOX_ID, SANDBOX_ID)
    } else {
        // SAFETY: geteuid and getegid only return this process's ids.
        unsafe { (libc::geteuid(), libc::getegid()) }
    }
}

fn c_path(path: &Path) -> Result<CString, SetupError> {
    CString::new(path.as_os_str().as_bytes()).map_err(|_| SetupError::Unenforceable {
        reason: format!("{} holds a NUL", path.display()),
    })
}

/// An anonymous file holding `bytes`, read from its start: what `--args` and
/// `--add-seccomp-fd` read.
fn filled_file(bytes: &[u8]) -> Result<OwnedFd, String> {
    let failed = |e: std::io::Error| format!("cannot pass the sandbox's settings: {e}");
    // SAFETY: a NUL-terminated name and a flag; the descriptor is owned at once.
    let fd = unsafe { libc::memfd_create(c"codemode-sandbox".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(failed(std::io::Error::last_os_error()));
    }
    // SAFETY: `fd` was just made and nothing else owns it.
    let mut file = std::fs::File::from(unsafe { OwnedFd::from_raw_fd(fd) });
    file.write_all(bytes).map_err(failed)?;
    file.seek(std::io::SeekFrom::Start(0)).map_err(failed)?;
    Ok(OwnedFd::from(file))
}

impl Backend for Sandbox {
    fn name(&self) -> &'static str {
        "sandbox"
    }

    fn environment(&self) -> Vec<(OsString, OsString)> {
        let mut env = crate::environment::minimal(&self.pass_env);
        env.push(("TMPDIR".into(), "/tmp".into()));
        env
    }

    fn launch(&self, spec: &Spawn<'_>, terminal: Option<&Path>) -> Result<Launch, String> {
        // The working directory as the command sees it: the path of the handle the call
        // opened beneath the workspace, which the sandbox shows at the same place.
        let cwd = std::fs::canonicalize(&spec.cwd)
            .map_err(|e| format!("cannot name the working directory: {e}"))?;
        if !cwd.starts_with(&self.layout.workspace) {
            return Err(format!(
                "the working directory {} is outside the workspace",
                cwd.display()
            ));
        }
        let mut inherited = self
            .filters
            .iter()
            .map(|program| filled_file(program))
            .collect::<Result<Vec<_>, _>>()?;
        let filters: Vec<RawFd> = inherited.iter().map(AsRawFd::as_raw_fd).collect();
        // Read from a descriptor rather than given on the command line, where every process
        // of the sandbox could read them in its first process's `cmdline`.
        let mut settings = Vec::new();
        for arg in self.layout.arguments(&cwd, terminal, &filters) {
            settings.extend_from_slice(arg.as_bytes());
            settings.push(0);
        }
        let settings = filled_file(&settings)?;
        let args = vec![
            OsString::from("--args"),
            OsString::from(settings.as_raw_fd().to_string()),
            OsString::from("--"),
            spec.program.as_os_str().to_owned(),
        ]
        .into_iter()
        .chain(spec.args.iter().cloned())
        .collect();
        inherited.push(settings);
        let fds: Vec<RawFd> = inherited.iter().map(AsRawFd::as_raw_fd).collect();
        let cgroup = match &self.cgroups {
            Some((cgroups, limits)) => Some(
                cgroups
                    .enter(*limits)
                    .map_err(|e| format!("cannot make the command's cgroup: {e}"))?,
            ),
            None => None,
        };
        let join = cgroup
            .as_ref()
            .map(cgroups::Membership::join_fds)
            .unwrap_or_default();
        let as_root = self.as_root.clone();
        Ok(Launch {
            program: self.bwrap.path.clone(),
            args,
            cwd: PathBuf::from("/"),
            child_step: Some(Box::new(move || {
                child::prepare(as_root.as_ref(), &join, &fds)
            })),
            inherited,
            held: cgroup.map(|c| Box::new(c) as Box<dyn Send + Sync>),
        })
    }

    fn forks(&self) -> bool {
        true
    }
}
