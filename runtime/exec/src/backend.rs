//! The seam the execution tools start processes through: what a backend gives a command
//! before it is spawned. `local` gives it codemode's environment less codemode's secrets;
//! `sandbox` (see `sandbox/`) confines it.

use std::ffi::OsString;

use process_wrap::tokio::CommandWrap;

pub trait Backend: Send + Sync + 'static {
    /// `local` or `sandbox`, as `--exec` names it.
    fn name(&self) -> &'static str;

    /// The environment a command starts with (a call's own variables are added on top).
    fn environment(&self) -> Vec<(OsString, OsString)>;

    /// Prepares `command`'s confinement before it is spawned.
    fn confine(&self, command: &mut CommandWrap) -> Result<(), String>;

    /// Whether `confine` adds work between fork and exec, which rules out `posix_spawn` (such
    /// a backend's processes then also get a session of their own, at no extra cost).
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

    fn confine(&self, _command: &mut CommandWrap) -> Result<(), String> {
        Ok(())
    }
}
