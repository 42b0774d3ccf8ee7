//! The seam the execution tools start processes through: what a backend adds to a command
//! before it is spawned. `local` adds nothing; `sandbox` (see `sandbox.rs`) confines writes to
//! the workspace and a private temporary directory and denies the network.

use process_wrap::tokio::CommandWrap;

pub trait Backend: Send + Sync + 'static {
    /// `local` or `sandbox`, as `--exec` names it.
    fn name(&self) -> &'static str;

    /// Prepares `command` (its environment, its confinement) before it is spawned.
    fn confine(&self, command: &mut CommandWrap) -> Result<(), String>;

    /// Whether `confine` adds work between fork and exec, which rules out `posix_spawn` (such
    /// a backend's processes then also get a session of their own, at no extra cost).
    fn forks(&self) -> bool {
        false
    }
}

/// Runs commands as codemode's own user, with its environment, anywhere it may write.
pub struct Local;

impl Backend for Local {
    fn name(&self) -> &'static str {
        "local"
    }

    fn confine(&self, _command: &mut CommandWrap) -> Result<(), String> {
        Ok(())
    }
}
