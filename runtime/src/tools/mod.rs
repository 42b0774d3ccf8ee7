//! The tool registry, its scopes and the six-stage pipeline.
//!
//! Every tool call, whether the model makes it directly or a program makes it from inside
//! `run_code`, goes through one [`Registry`] and one pipeline ([`Registry::execute`]):
//! argument snapshot → pre-execute hooks (allow / deny / ask) → guards → execute wrappers around
//! the body → output validation and render → post-execute hooks → `finalize_content` → the
//! immutable final result → result observers.
//!
//! Architecture invariant: this module knows nothing about wasm or about any code runtime; the
//! `run_code` tool plugs in through [`Registry::set_code_transport`] and the name is reserved here.

pub mod content;
pub mod definition;
pub mod error;
pub mod events;
pub mod hooks;
mod json_text;
pub mod pipeline;
pub mod plugins;
pub mod registry;
pub mod result;
pub mod schema;
pub mod scope;

pub use content::{ContentBlock, ContextMessage, ContextSource};
pub use definition::{ToolDefinition, ToolDefinitionBuilder, ToolOutput, ToolResultView, ToolRunContext};
pub use error::{codes, ErrorInfo, RegistryError, ToolError};
pub use events::{EventSink, JsonlWriter, SessionEvent};
pub use hooks::{
    ApprovalHook, ApprovalOutcome, ApprovalRequest, ExecuteCall, ExecuteNext, PostDecision,
    PostNext, PreDecision, PreNext,
};
pub use pipeline::{ToolCall, ToolExecutionInput};
pub use registry::{ExecutionMode, RegistrationGuard, Registry, Restriction, ToolMode, ToolSchema};
pub use result::{ToolExecutionResult, ToolFailure, ToolOutcome};
pub use schema::{Schema, SchemaError};
pub use scope::{AgentScope, ExecutionToken};

/// The reserved name of the Code Mode transport: never registrable, shadowable or restrictable.
pub const RUN_CODE_NAME: &str = "run_code";
