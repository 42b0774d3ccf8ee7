//! Failure vocabulary of the tool pipeline: the reference's error codes, tool errors and
//! registration errors.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The `info.code` values the pipeline produces, spelled as in the reference.
pub mod codes {
    /// The arguments do not match the tool's parameter schema (or do not decode).
    pub const INVALID_ARGS: &str = "INVALID_ARGS";
    /// No tool of that name is visible to the caller, or it may be called only from a
    /// `run_code` program.
    pub const UNKNOWN_TOOL: &str = "UNKNOWN_TOOL";
    /// The body's value failed the output schema, or rendering or presentation metadata failed.
    pub const INVALID_TOOL_OUTPUT: &str = "INVALID_TOOL_OUTPUT";
    /// The caller cancelled a call whose body had started and would otherwise have succeeded.
    pub const ABORTED: &str = "ABORTED";
    /// The caller cancelled the call before its body started.
    pub const ABORTED_BEFORE_DISPATCH: &str = "ABORTED_BEFORE_DISPATCH";
    /// The tool's declared timeout fired before the body finished.
    pub const TOOL_TIMEOUT: &str = "TOOL_TIMEOUT";
    /// A schema the registry cannot enforce: outside the subset, or a foreign one that does not
    /// compile.
    pub const UNSUPPORTED_SCHEMA: &str = "UNSUPPORTED_SCHEMA";
    /// A `run_code` program failed; the message carries the failure and captured output.
    pub const CODE_RUN_FAILED: &str = "CODE_RUN_FAILED";
}

/// Internal routing information of a failure: the error class name and its code.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorInfo {
    /// The error class name, e.g. `ToolArgsError`.
    pub name: String,
    /// The error code, one of [`codes`] for the pipeline's own errors.
    pub code: String,
}

/// What a tool body, hook or renderer fails with. `info` is present only for coded errors, as
/// for the reference's `HarnessError`; plain errors carry just their message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolError {
    message: String,
    info: Option<ErrorInfo>,
    input: Option<std::sync::Arc<super::NeedsInput>>,
}

impl ToolError {
    /// A plain error with only a message.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            info: None,
            input: None,
        }
    }

    /// A call that needs a person's answers to `input`'s questions before it can finish, and
    /// found no one to ask while it ran. A run that pauses keeps the questions and makes the
    /// call again with the answers (see [`super::input`]); anything else sees `message`.
    pub fn needs_input(message: impl Into<String>, input: super::NeedsInput) -> Self {
        Self {
            message: message.into(),
            info: None,
            input: Some(std::sync::Arc::new(input)),
        }
    }

    /// The questions of an error made by [`ToolError::needs_input`].
    pub fn input(&self) -> Option<&std::sync::Arc<super::NeedsInput>> {
        self.input.as_ref()
    }

    /// An error with routing information (`name` is the error class, `code` its code).
    pub fn coded(
        name: impl Into<String>,
        code: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Self {
            message: message.into(),
            info: Some(ErrorInfo {
                name: name.into(),
                code: code.into(),
            }),
            input: None,
        }
    }

    /// The model-facing message.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The routing information; `None` for plain errors.
    pub fn info(&self) -> Option<&ErrorInfo> {
        self.info.as_ref()
    }

    /// The error code; `None` for plain errors.
    pub fn code(&self) -> Option<&str> {
        self.info.as_ref().map(|info| info.code.as_str())
    }

    pub(crate) fn into_parts(
        self,
    ) -> (
        String,
        Option<ErrorInfo>,
        Option<std::sync::Arc<super::NeedsInput>>,
    ) {
        (self.message, self.info, self.input)
    }

    pub(crate) fn invalid_args(violations: &[String]) -> Self {
        Self::invalid_arguments(violations.join("; "))
    }

    /// The `INVALID_ARGS` error a tool's body raises for arguments its schema let through
    /// (`invalid arguments: MESSAGE`), as the pipeline raises it for a schema's violations.
    pub fn invalid_arguments(message: impl std::fmt::Display) -> Self {
        Self::coded(
            "ToolArgsError",
            codes::INVALID_ARGS,
            format!("invalid arguments: {message}"),
        )
    }

    pub(crate) fn unknown_tool(name: &str) -> Self {
        Self::coded(
            "ToolNotFoundError",
            codes::UNKNOWN_TOOL,
            format!("unknown tool \"{name}\""),
        )
    }

    pub(crate) fn invalid_output(name: &str, violations: &[String]) -> Self {
        Self::coded(
            "ToolOutputError",
            codes::INVALID_TOOL_OUTPUT,
            format!(
                "tool \"{name}\" returned invalid output: {}",
                violations.join("; ")
            ),
        )
    }
}

impl fmt::Display for ToolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// Any standard error becomes a plain (uncoded) tool error, so `?` works inside tool bodies.
impl<E: std::error::Error> From<E> for ToolError {
    fn from(error: E) -> Self {
        Self::new(error.to_string())
    }
}

/// A registration, restriction or presentation call that the registry refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct RegistryError {
    message: String,
    code: Option<&'static str>,
}

impl RegistryError {
    pub(crate) fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            code: None,
        }
    }

    pub(crate) fn with_code(message: impl Into<String>, code: &'static str) -> Self {
        Self {
            message: message.into(),
            code: Some(code),
        }
    }

    /// Why the registry refused.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// `UNSUPPORTED_SCHEMA` for a schema outside the subset; `None` for other refusals.
    pub fn code(&self) -> Option<&'static str> {
        self.code
    }
}
