//! The `sandbox` backend: every process it starts may read and execute what the user can
//! (except other sessions' terminals), but write only beneath the workspace and a private
//! temporary directory, and holds no capability at all, whichever user codemode runs as, root
//! included.
//!
//! What confines it, all enforced by the kernel:
//! - a user namespace of its own where the kernel allows one (with its own hostname, network
//!   and IPC), else those three namespaces alone where codemode may create them;
//! - every capability dropped (bounding, ambient, effective, permitted, inheritable) with the
//!   secure bits locked, and `no_new_privs`;
//! - Landlock at ABI 6 or later (`rules.rs`): writes, device nodes, device ioctls, TCP, signals
//!   and abstract unix sockets; a kernel below ABI 6 is refused when the backend is created,
//!   never silently run unconfined;
//! - path-named unix sockets: Landlock from ABI 9, else a seccomp filter (`seccomp.rs`) that
//!   refuses creating unix sockets at all; without a network namespace, the same filter refuses
//!   IP and packet sockets (Landlock cuts only TCP);
//! - descriptors: none but 0–2 survive exec;
//! - environment: a short list of harmless variables, plus the names passed through.
//!
//! Everything is prepared in the parent; the child only makes system calls (`child.rs`).

mod child;
mod rules;
mod seccomp;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use process_wrap::tokio::CommandWrap;

use crate::backend::Backend;
use crate::SetupError;
pub use child::Namespaces;
use child::Plan;
pub use rules::MINIMUM_ABI;

/// How a sandbox is set up beyond its workspace.
#[derive(Clone, Debug, Default)]
pub struct SandboxOptions {
    /// Environment variables passed to commands besides the defaults (`PATH`, `HOME`, `LANG`,
    /// `LANGUAGE`, `LC_*`, `TERM`, `USER`, and `TMPDIR`, which points at the private
    /// temporary directory). codemode's own secrets are refused.
    pub pass_env: Vec<String>,
}

/// What this kernel lets the sandbox enforce, as found when it was created.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Protections {
    /// The Landlock ABI in force (at least [`MINIMUM_ABI`]).
    pub landlock_abi: i32,
    /// Which namespaces each command gets.
    pub namespaces: Namespaces,
    /// How connecting to path-named unix sockets is stopped.
    pub unix_sockets: UnixSockets,
    /// How the network is cut.
    pub network: Network,
}

/// How commands are kept off the network.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Network {
    /// An empty network namespace of their own.
    Namespace,
    /// No namespace: Landlock refuses TCP, seccomp refuses creating IP and packet sockets.
    SocketsRefused,
    /// No namespace and no seccomp filter: only TCP is refused; the reason.
    TcpOnly(String),
}

/// How path-named unix sockets outside the workspace are kept out of reach.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UnixSockets {
    /// Landlock refuses connecting to any outside the workspace (ABI 9).
    Landlock,
    /// No unix socket can be created at all (seccomp), inside the workspace included.
    CreationRefused,
    /// Not stopped; the reason.
    Reachable(String),
}

impl std::fmt::Display for Protections {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Landlock ABI {} (writes only in the workspace and its temporary directory, no device nodes, no TCP, device ioctls only on the own terminal, signals and abstract unix sockets scoped to the command); no capabilities, no_new_privs; ",
            self.landlock_abi
        )?;
        f.write_str(match self.namespaces {
            Namespaces::User => "own user, hostname, network and IPC namespaces; ",
            Namespaces::Isolated => {
                "own hostname, network and IPC namespaces (no user namespace); "
            }
            Namespaces::Shared => {
                "no namespaces (the host's hostname; as a user other than root, codemode's own /proc/PID/environ is readable by commands); "
            }
        })?;
        match &self.network {
            Network::Namespace => {}
            Network::SocketsRefused => {
                f.write_str("IP and packet sockets cannot be created (seccomp); ")?
            }
            Network::TcpOnly(why) => write!(f, "UDP and other protocols NOT blocked ({why}); ")?,
        }
        match &self.unix_sockets {
            UnixSockets::Landlock => f.write_str("unix sockets outside the workspace refused (Landlock)"),
            UnixSockets::CreationRefused => f.write_str(
                "unix sockets cannot be created (seccomp; Landlock ABI 9 would allow those in the workspace)",
            ),
            UnixSockets::Reachable(why) => write!(f, "path-named unix sockets NOT blocked: {why}"),
        }
    }
}

const NOTHING_STARTS: &str = "a confined test process could not start (dropping capabilities, no_new_privs, seccomp or Landlock failed)";

pub struct Sandbox {
    plan: Arc<Plan>,
    temp: PrivateTemp,
    pass_env: Vec<String>,
    protections: Protections,
}

impl Sandbox {
    /// Prepares the confinement for `workspace` with default options.
    pub fn new(workspace: &Path) -> Result<Self, SetupError> {
        Self::with_options(workspace, SandboxOptions::default())
    }

    /// Prepares the confinement for `workspace`. `Err` says why this kernel cannot enforce
    /// it, or what is wrong with the options.
    pub fn with_options(workspace: &Path, options: SandboxOptions) -> Result<Self, SetupError> {
        crate::environment::check_pass_through(&options.pass_env)?;
        let abi = rules::kernel_abi();
        rules::check_abi(abi)?;
        let workspace = crate::workspace::resolve(workspace)?;
        let temp = PrivateTemp::create()?;
        let ruleset = Arc::new(rules::build(abi, &workspace, &temp.0)?);
        // The first of these the kernel lets a throwaway command start under.
        let (plan, namespaces, filtered) =
            [Namespaces::User, Namespaces::Isolated, Namespaces::Shared]
                .into_iter()
                .map(|namespaces| {
                    let filter = seccomp::filter(seccomp::Refuse {
                        unix_sockets: abi < rules::UNIX_SOCKET_ABI,
                        ip_sockets: namespaces == Namespaces::Shared,
                    });
                    let program = filter.as_ref().ok().cloned().flatten();
                    let plan = Plan::new(ruleset.clone(), namespaces, program);
                    (Arc::new(plan), namespaces, filter.map(|_| ()))
                })
                .find(|(plan, _, _)| plan_works(plan))
                .ok_or_else(|| SetupError::Unenforceable {
                    reason: NOTHING_STARTS.to_owned(),
                })?;
        let unix_sockets = match (&filtered, abi >= rules::UNIX_SOCKET_ABI) {
            (_, true) => UnixSockets::Landlock,
            (Ok(()), false) => UnixSockets::CreationRefused,
            (Err(why), false) => UnixSockets::Reachable(why.clone()),
        };
        let network = match (namespaces, filtered) {
            (Namespaces::User | Namespaces::Isolated, _) => Network::Namespace,
            (Namespaces::Shared, Ok(())) => Network::SocketsRefused,
            (Namespaces::Shared, Err(why)) => Network::TcpOnly(why),
        };
        Ok(Self {
            plan,
            temp,
            pass_env: options.pass_env,
            protections: Protections {
                landlock_abi: abi,
                namespaces,
                unix_sockets,
                network,
            },
        })
    }

    /// The private temporary directory (`TMPDIR` of every confined process).
    pub fn temp_dir(&self) -> &Path {
        &self.temp.0
    }

    /// What the kernel enforces for this sandbox.
    pub fn protections(&self) -> &Protections {
        &self.protections
    }
}

/// The sandbox's private temporary directory, removed with it.
struct PrivateTemp(PathBuf);

impl PrivateTemp {
    fn create() -> Result<Self, SetupError> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "codemode-sandbox-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let mut builder = std::fs::DirBuilder::new();
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        builder.create(&dir).map_err(|source| SetupError::TempDir {
            path: dir.clone(),
            source,
        })?;
        match dir.canonicalize() {
            Ok(resolved) => Ok(Self(resolved)),
            Err(source) => {
                let _ = std::fs::remove_dir(&dir);
                Err(SetupError::TempDir { path: dir, source })
            }
        }
    }
}

impl Drop for PrivateTemp {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Whether a throwaway child confined by `plan` starts and exits cleanly.
fn plan_works(plan: &Arc<Plan>) -> bool {
    use std::os::unix::process::CommandExt;
    let mut command = std::process::Command::new("/bin/sh");
    command
        .arg("-c")
        .arg("exit 0")
        .env_clear()
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let plan = plan.clone();
    // SAFETY: `Plan::apply` makes only system calls on buffers prepared before the fork.
    unsafe {
        command.pre_exec(move || plan.apply());
    }
    command.status().is_ok_and(|s| s.success())
}

impl Backend for Sandbox {
    fn name(&self) -> &'static str {
        "sandbox"
    }

    fn environment(&self) -> Vec<(OsString, OsString)> {
        let mut env = crate::environment::minimal(&self.pass_env);
        env.push(("TMPDIR".into(), self.temp.0.clone().into()));
        env
    }

    fn confine(&self, command: &mut CommandWrap) -> Result<(), String> {
        let plan = self.plan.clone();
        // SAFETY: between fork and exec `Plan::apply` makes only system calls on buffers the
        // parent prepared, and allocates nothing.
        unsafe {
            command.command_mut().pre_exec(move || plan.apply());
        }
        Ok(())
    }

    fn forks(&self) -> bool {
        true
    }
}
