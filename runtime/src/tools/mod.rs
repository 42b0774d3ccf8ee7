//! The tool registry, its scopes and the six-stage pipeline.
//!
//! Every tool call, whether the model makes it directly or a program makes it from inside
//! `run_code`, goes through one [`Registry`] and one pipeline ([`Registry::execute`]):
//! argument snapshot → pre-execute hooks (allow / deny / ask) → guards → execute wrappers around
//! the body → output validation and render → post-execute hooks → `finalize_content` → the
//! immutable final result → result observers.
//!
//! ```
//! use codemode_runtime::signal::AbortSignal;
//! use codemode_runtime::tools::schema::dsl::*;
//! use codemode_runtime::tools::{Registry, Schema, ToolDefinition, ToolExecutionInput, ToolOutput};
//! use serde_json::json;
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let registry = Registry::new();
//! let echo = ToolDefinition::builder("echo")
//!     .description("Echo the text back.")
//!     .parameters(Schema::parameters(Parameters::new().required("text", string())).unwrap())
//!     .output(ToolOutput::text())
//!     .execute(|args, _ctx| async move { Ok(args["text"].clone()) })
//!     .build();
//! let _registration = registry.register(echo, None).unwrap(); // unregisters when dropped
//!
//! let result = registry
//!     .execute(ToolExecutionInput::new("call-1", "echo", json!({"text": "hi"}), AbortSignal::never()))
//!     .await;
//! assert_eq!(result.text(), "hi");
//!
//! let invalid = registry
//!     .execute(ToolExecutionInput::new("call-2", "echo", json!({}), AbortSignal::never()))
//!     .await;
//! assert_eq!(invalid.error_code(), Some("INVALID_ARGS"));
//! assert_eq!(invalid.text(), "Error: invalid arguments: missing required property \"text\"");
//! # });
//! ```
//!
//! Architecture invariant: this module knows nothing about wasm or about any code runtime; the
//! `run_code` tool plugs in through [`Registry::set_code_transport`] and the name is reserved here.

mod approvals;
pub mod content;
pub mod definition;
pub mod error;
pub mod events;
pub mod hooks;
pub mod input;
pub mod pipeline;
pub mod plugins;
pub mod registry;
pub mod result;
pub mod schema;
pub mod scope;

pub use codemode_sdk_gen::ToolSchema;
pub use content::{ContentBlock, ContextMessage, ContextSource};
pub use definition::{
    ToolDefinition, ToolDefinitionBuilder, ToolOutput, ToolResultView, ToolRunContext,
};
pub use error::{codes, ErrorInfo, RegistryError, ToolError};
pub use events::{EventSink, JsonlWriter, SessionEvent};
pub use hooks::{
    ApprovalHook, ApprovalOutcome, ApprovalRequest, ApprovalScope, ExecuteCall, ExecuteNext,
    PostDecision, PostNext, PreDecision, PreNext,
};
pub use input::{InputAnswers, NeedsInput};
pub use pipeline::{StagedCall, ToolCall, ToolExecutionInput};
pub use registry::{ExecutionMode, RegistrationGuard, Registry, Restriction, ToolMode};
pub use result::{ToolExecutionResult, ToolFailure, ToolOutcome};
pub use schema::{Schema, SchemaError};
pub use scope::{AgentScope, ExecutionToken};

/// The reserved name of the Code Mode transport: never registrable, shadowable or restrictable.
pub const RUN_CODE_NAME: &str = "run_code";
