//! The seam the execution tools start processes through: what a backend makes of a command
//! before it is spawned. `local` runs it as it is, with codemode's environment less codemode's
//! secrets; `sandbox` (see `sandbox/`) starts it inside a confinement of its own.

use std::ffi::OsString;
use std::io;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use crate::subprocess::Spawn;

/// Work done in the child between fork and exec: system calls on what the parent prepared,
/// nothing that allocates.
pub type ChildStep = Box<dyn FnMut() -> io::Result<()> + Send + Sync>;

/// What is started for a command.
pub struct Launch {
    /// The program executed, and its arguments.
    pub program: PathBuf,
    pub args: Vec<OsString>,
    /// The directory the program starts in.
    pub cwd: PathBuf,
    /// Runs in the child after its descriptors are marked close-on-exec, before exec.
    pub child_step: Option<ChildStep>,
    /// Descriptors the child inherits (its `child_step` clears their close-on-exec flag):
    /// kept open until the child has started.
    pub inherited: Vec<OwnedFd>,
    /// Kept for as long as the process runs, dropped once it has been reaped (a command's
    /// cgroup).
    pub held: Option<Box<dyn Send + Sync>>,
}

impl Launch {
    /// `spec` as it is, started directly.
    pub fn direct(spec: &Spawn<'_>) -> Self {
        Self {
            program: spec.program.to_owned(),
            args: spec.args.clone(),
            cwd: spec.cwd.clone(),
            child_step: None,
            inherited: Vec::new(),
            held: None,
        }
    }
}

pub trait Backend: Send + Sync + 'static {
    /// `local` or `sandbox`, as `--exec` names it.
    fn name(&self) -> &'static str;

    /// The environment a command starts with (a call's own variables are added on top).
    fn environment(&self) -> Vec<(OsString, OsString)>;

    /// What to start for `spec`; `terminal` is the path of the pseudo-terminal that will be
    /// its standard streams, if it runs on one.
    fn launch(&self, spec: &Spawn<'_>, terminal: Option<&Path>) -> Result<Launch, String>;

    /// Whether every launch does work between fork and exec, which rules out `posix_spawn`
    /// (such a backend's processes then also get a session of their own, at no extra cost).
    fn forks(&self) -> bool {
        false
    }
}

/// Runs commands as codemode's own user, with its environment less its secrets
/// ([`crate::environment::SECRETS`]), anywhere it may write.
pub struct Local;

impl Backend for Local {
    fn name(&self) -> &'static str {
        "local"
    }

    fn environment(&self) -> Vec<(OsString, OsString)> {
        crate::environment::inherited()
    }

    fn launch(&self, spec: &Spawn<'_>, _terminal: Option<&Path>) -> Result<Launch, String> {
        Ok(Launch::direct(spec))
    }
}
