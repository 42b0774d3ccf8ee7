//! Why an execution runtime or a sandbox cannot be set up. What a command does once running is
//! a tool result, not one of these.

use std::path::PathBuf;

/// A workspace, program, option or kernel that the execution tools cannot work with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SetupError {
    /// The workspace cannot be resolved.
    #[error("the workspace {} cannot be used: {source}", path.display())]
    Workspace {
        /// The workspace as given.
        path: PathBuf,
        /// Why it cannot be resolved.
        #[source]
        source: std::io::Error,
    },
    /// The workspace is not a directory.
    #[error("the workspace {} is not a directory", path.display())]
    NotADirectory {
        /// The resolved workspace.
        path: PathBuf,
    },
    /// `bash` (or another program the tools need) cannot be run.
    #[error("{name} cannot be run: {reason}")]
    MissingProgram {
        /// The program.
        name: String,
        /// Not found on `PATH`, or not an executable file.
        reason: String,
    },
    /// A pass-through name is not a variable name.
    #[error("{name:?} is not an environment variable name (give the name alone, without a value)")]
    EnvironmentName {
        /// The name as given.
        name: String,
    },
    /// A pass-through name is one of codemode's own credentials.
    #[error("{name} holds one of codemode's own credentials and is never passed to commands")]
    SecretEnvironment {
        /// The name.
        name: String,
    },
    /// The system cannot give part of the confinement.
    #[error("this system cannot enforce the sandbox: {reason}")]
    Unenforceable {
        /// What was refused.
        reason: String,
    },
    /// The sandbox's private temporary directory cannot be made.
    #[error("cannot create the sandbox's temporary directory {}: {source}", path.display())]
    TempDir {
        /// The directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}
