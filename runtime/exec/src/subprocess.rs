//! Managed process trees: a command started as the leader of a new process group (so its whole
//! tree, `&` children included, shares it), its stdout and stderr merged into one pipe in the
//! order they are written, signals sent to the group, and "terminate then wait" teardown
//! (SIGTERM to the group, a grace period, SIGKILL to the group). A dropped [`Process`] kills
//! its group (`process-wrap`'s `KillOnDrop`), so no path out of its owner leaves the tree
//! running.
//!
//! A new group, not a new session, where nothing else needs the child's side of a fork: the
//! standard library then starts it with `posix_spawn`, far faster than a fork of a process
//! holding wasmtime's memory reservations (`codemode bench` measures it as `bash_true_ms`). Where the backend works between fork and exec anyway
//! (`sandbox`), and for terminals (which need a controlling terminal), the leader gets a
//! session of its own, and signals also reach the session's other groups.

use std::ffi::OsString;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use process_wrap::tokio::{ChildWrapper, CommandWrap, KillOnDrop, ProcessGroup, ProcessSession};
use tokio::net::unix::pipe;

use crate::backend::{Backend, Launch};

/// What to start.
pub struct Spawn<'a> {
    pub program: &'a Path,
    pub args: Vec<OsString>,
    /// The working directory: a path the child changes into before it runs.
    pub cwd: PathBuf,
    /// Variables set on top of the backend's environment.
    pub env: Vec<(OsString, OsString)>,
}

/// How a process ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Exit {
    /// The exit code, when it exited by itself.
    pub code: Option<i32>,
    /// The signal that ended it, when one did.
    pub signal: Option<i32>,
}

impl From<ExitStatus> for Exit {
    fn from(status: ExitStatus) -> Self {
        Self {
            code: status.code(),
            signal: status.signal(),
        }
    }
}

/// A running process tree.
pub struct Process {
    child: Box<dyn ChildWrapper>,
    exit: Option<Exit>,
    /// The session the leader leads, if it leads one: its id, the leader's, kept from the
    /// start because a reaped leader no longer reports it. It stays the session's while any
    /// member lives (the kernel reuses no id that a live session or group still bears).
    session: Option<i32>,
    /// Its place among the runtime's running commands, given back when the leader exits.
    admission: Option<tokio::sync::OwnedSemaphorePermit>,
    /// What its backend keeps for as long as it runs.
    _held: Option<Box<dyn Send + Sync>>,
}

impl std::fmt::Debug for Process {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Process")
            .field("pid", &self.child.id())
            .field("exit", &self.exit)
            .finish()
    }
}

/// Finds `name` on `PATH` (or takes it as a path when it has a `/`).
pub(crate) fn which(name: &str) -> Result<PathBuf, String> {
    if name.contains('/') {
        let path = PathBuf::from(name);
        return if is_executable(&path) {
            Ok(path)
        } else {
            Err(format!("{name} is not an executable file"))
        };
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| is_executable(candidate))
        .ok_or_else(|| format!("{name} was not found on PATH"))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

impl Process {
    /// Starts `spec` on `backend` with stdin closed and stdout and stderr on one pipe, whose
    /// read end is returned.
    pub(crate) fn spawn(
        spec: Spawn<'_>,
        backend: &dyn Backend,
    ) -> Result<(Self, pipe::Receiver), String> {
        let (reader, writer) =
            std::io::pipe().map_err(|e| format!("cannot create an output pipe: {e}"))?;
        let writer_err = writer
            .try_clone()
            .map_err(|e| format!("cannot share the output pipe: {e}"))?;
        let stdio = [Stdio::null(), Stdio::from(writer), Stdio::from(writer_err)];
        let process = Self::start(spec, backend, stdio, Leads::GroupOrSession)?;
        let receiver = pipe::Receiver::from_owned_fd(OwnedFd::from(reader))
            .map_err(|e| format!("cannot read the output pipe: {e}"))?;
        Ok((process, receiver))
    }

    /// Starts `spec` on `backend` as the leader of a new session whose controlling terminal is
    /// the pseudo-terminal `slave` (its stdin, stdout and stderr).
    pub(crate) fn spawn_pty(
        spec: Spawn<'_>,
        backend: &dyn Backend,
        slave: OwnedFd,
    ) -> Result<Self, String> {
        let dup = |fd: &OwnedFd| {
            fd.try_clone()
                .map_err(|e| format!("cannot share the terminal: {e}"))
        };
        let path = std::fs::read_link(format!("/proc/self/fd/{}", slave.as_raw_fd()))
            .map_err(|e| format!("cannot name the terminal: {e}"))?;
        let stdio = [
            Stdio::from(dup(&slave)?),
            Stdio::from(dup(&slave)?),
            Stdio::from(slave),
        ];
        Self::start(spec, backend, stdio, Leads::TerminalSession(path))
    }

    fn start(
        spec: Spawn<'_>,
        backend: &dyn Backend,
        [stdin, stdout, stderr]: [Stdio; 3],
        leads: Leads,
    ) -> Result<Self, String> {
        let terminal = match &leads {
            Leads::TerminalSession(path) => Some(path.as_path()),
            Leads::GroupOrSession => None,
        };
        let Launch {
            program,
            args,
            cwd,
            child_step,
            inherited,
            held,
        } = backend.launch(&spec, terminal)?;
        // A child that is forked anyway resets the signals codemode ignores and marks its
        // descriptors itself, where no other thread can open one in between; one started with
        // `posix_spawn` is forked only when codemode ignores a signal.
        let forked = backend.forks()
            || terminal.is_some()
            || child_step.is_some()
            || crate::signals::any_ignored();
        if !forked {
            // Nothing runs in a spawned child before exec: mark codemode's descriptors here.
            crate::descriptors::close_on_exec_above_stdio().map_err(|e| {
                format!("cannot keep codemode's descriptors out of the command: {e}")
            })?;
        }
        let environment = backend.environment();
        let mut command = CommandWrap::with_new(&program, |c| {
            c.args(&args)
                .current_dir(&cwd)
                .env_clear()
                .envs(environment)
                .envs(spec.env.iter().map(|(k, v)| (k, v)))
                .stdin(stdin)
                .stdout(stdout)
                .stderr(stderr);
        });
        if forked {
            // SAFETY: between fork and exec the closure makes only `sigaction` and
            // `close_range` calls on values on its own stack, and allocates nothing.
            unsafe {
                command.command_mut().pre_exec(|| {
                    crate::signals::reset_to_default()?;
                    crate::descriptors::close_on_exec_above_stdio()
                });
            }
        }
        if let Some(step) = child_step {
            // SAFETY: a backend's child step makes only system calls on what its parent
            // prepared (the `ChildStep` contract); it runs after the marking above.
            unsafe {
                command.command_mut().pre_exec(step);
            }
        }
        let session = match leads {
            Leads::GroupOrSession if !forked => {
                command.wrap(ProcessGroup::leader());
                false
            }
            Leads::GroupOrSession => {
                command.wrap(ProcessSession);
                true
            }
            Leads::TerminalSession(_) => {
                command.wrap(ProcessSession).wrap(ControllingTerminal);
                true
            }
        };
        command.wrap(KillOnDrop);
        let child = command
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", spec.program.display()))?;
        let session = session
            .then(|| child.id().and_then(|id| i32::try_from(id).ok()))
            .flatten();
        // The command holds the parent's copies of the child's descriptors until it is
        // dropped: without this a pipe's reader would never see the end of the output.
        drop(command);
        drop(inherited);
        Ok(Self {
            child,
            exit: None,
            session,
            admission: None,
            _held: held,
        })
    }

    /// Keeps `permit` until the leader exits.
    pub(crate) fn hold(&mut self, permit: tokio::sync::OwnedSemaphorePermit) {
        self.admission = Some(permit);
    }

    /// Waits for the leader to exit.
    pub async fn wait(&mut self) -> Exit {
        if let Some(exit) = self.exit {
            return exit;
        }
        let exit = match self.child.wait().await {
            Ok(status) => Exit::from(status),
            // The leader was already reaped: it is gone, how is not known.
            Err(_) => Exit {
                code: None,
                signal: None,
            },
        };
        self.exit = Some(exit);
        self.admission = None;
        exit
    }

    /// Sends `signal` to the whole group, and, when the leader leads a session, to every other
    /// process of it (a job-control shell puts each pipeline in a group of its own). A group
    /// that is already gone is not an error.
    pub fn signal(&self, signal: i32) {
        let _ = self.child.signal(signal);
        if let Some(session) = self.session {
            signal_session(session, signal);
        }
    }

    /// Terminate then wait: SIGTERM to the group, up to `grace` for the leader to exit, then
    /// SIGKILL to the group; and SIGKILL again for members that outlived the leader.
    pub async fn terminate(&mut self, grace: Duration) -> Exit {
        if self.exit.is_none() {
            self.signal(libc::SIGTERM);
            if let Ok(exit) = tokio::time::timeout(grace, self.wait()).await {
                self.signal(libc::SIGKILL);
                return exit;
            }
        }
        self.signal(libc::SIGKILL);
        self.wait().await
    }
}

/// What a started process leads.
enum Leads {
    /// A new process group, started with `posix_spawn`, or a session where the backend forks
    /// anyway.
    GroupOrSession,
    /// A new session whose controlling terminal is the pseudo-terminal at this path.
    TerminalSession(PathBuf),
}

/// Makes the child's stdin (a terminal) its controlling terminal; runs after `ProcessSession`
/// made it a session leader.
#[derive(Debug)]
struct ControllingTerminal;

impl process_wrap::tokio::CommandWrapper for ControllingTerminal {
    fn pre_spawn(
        &mut self,
        command: &mut tokio::process::Command,
        _core: &CommandWrap,
    ) -> std::io::Result<()> {
        // SAFETY: between fork and exec the closure makes one ioctl, which is
        // async-signal-safe, and allocates nothing.
        unsafe {
            command.pre_exec(|| {
                if libc::ioctl(0, libc::TIOCSCTTY, 0) == 0 {
                    Ok(())
                } else {
                    Err(std::io::Error::last_os_error())
                }
            });
        }
        Ok(())
    }
}

/// Sends `signal` to every process of session `session` (found through `/proc`), the leader's
/// included.
fn signal_session(session: i32, signal: i32) {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return;
    };
    for entry in entries.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|name| name.parse::<i32>().ok())
        else {
            continue;
        };
        // SAFETY: getsid and kill only read their integer arguments.
        unsafe {
            if libc::getsid(pid) == session {
                libc::kill(pid, signal);
            }
        }
    }
}
