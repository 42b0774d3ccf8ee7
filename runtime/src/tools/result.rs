//! The outcome of one tool call. Final results are handed out as `Arc<ToolExecutionResult>`
//! with no interior mutability: what observers and callers see can no longer change.

use serde::ser::SerializeMap;
use serde::{Deserialize, Serialize, Serializer};
use serde_json::Value;

use super::content::{ContentBlock, ContextMessage};
use super::error::{codes, ErrorInfo, ToolError};

/// Why a call failed. `info` is absent for denials and plain tool errors.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolFailure {
    /// The error message.
    pub message: String,
    /// The error class and code, for coded failures.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub info: Option<ErrorInfo>,
}

/// Whether a call succeeded, with its value or its failure.
#[derive(Clone, Debug, PartialEq)]
pub enum ToolOutcome {
    /// The canonical value, validated against the tool's output schema.
    Success {
        /// The tool's value.
        value: Value,
        /// Whether the body asked the loop to end the turn after this call.
        concludes_turn: bool,
    },
    /// Failures carry no value.
    Failure(ToolFailure),
}

/// One call's result: the outcome plus what the model sees (`content`) and what the loop
/// receives (`additional_contexts`). Serializes as the reference's
/// `{isError, value?, error?, content, meta?, additionalContexts?, concludesTurn?}`.
#[derive(Clone, Debug)]
pub struct ToolExecutionResult {
    /// Success with its value, or the failure.
    pub outcome: ToolOutcome,
    /// What the model sees.
    pub content: Vec<ContentBlock>,
    /// Presentation metadata, computed only for top-level calls.
    pub meta: Option<Value>,
    /// Contexts handed to the loop with this result.
    pub additional_contexts: Vec<ContextMessage>,
    /// The execution whose body stage produced this result; anything else is re-validated.
    pub(crate) canonical: Option<super::scope::ExecutionToken>,
    /// The questions of a failure that needs a person's input ([`ToolError::needs_input`]).
    pub(crate) input: Option<std::sync::Arc<super::NeedsInput>>,
}

impl ToolExecutionResult {
    /// A success authored outside the body (by an execute wrapper): the pipeline validates and
    /// renders `value` through the tool's output contract.
    pub fn success(value: Value) -> Self {
        Self {
            outcome: ToolOutcome::Success {
                value,
                concludes_turn: false,
            },
            content: Vec::new(),
            meta: None,
            additional_contexts: Vec::new(),
            canonical: None,
            input: None,
        }
    }

    /// A failure rendered as the single text block `Error: <message>`.
    pub fn failure(message: impl Into<String>, info: Option<ErrorInfo>) -> Self {
        let message = message.into();
        Self {
            content: vec![ContentBlock::text(format!("Error: {message}"))],
            outcome: ToolOutcome::Failure(ToolFailure { message, info }),
            meta: None,
            additional_contexts: Vec::new(),
            canonical: None,
            input: None,
        }
    }

    /// The failure for `error`, keeping its message and routing information.
    pub fn from_error(error: ToolError) -> Self {
        let (message, info, input) = error.into_parts();
        let mut result = Self::failure(message, info);
        result.input = input;
        result
    }

    pub(crate) fn coded_failure(name: &str, code: &str, message: impl Into<String>) -> Self {
        Self::failure(
            message,
            Some(ErrorInfo {
                name: name.into(),
                code: code.into(),
            }),
        )
    }

    pub(crate) fn aborted(prior: Option<&ToolExecutionResult>) -> Self {
        let mut result = Self::coded_failure("AbortError", codes::ABORTED, "tool call aborted");
        if let Some(prior) = prior {
            result.additional_contexts = prior.additional_contexts.clone();
        }
        result
    }

    pub(crate) fn aborted_before_dispatch(prior: Option<&ToolExecutionResult>) -> Self {
        let mut result = Self::coded_failure(
            "AbortError",
            codes::ABORTED_BEFORE_DISPATCH,
            "tool call aborted before dispatch",
        );
        if let Some(prior) = prior {
            result.additional_contexts = prior.additional_contexts.clone();
        }
        result
    }

    /// Whether the call failed.
    pub fn is_error(&self) -> bool {
        matches!(self.outcome, ToolOutcome::Failure(_))
    }

    /// The value of a success.
    pub fn value(&self) -> Option<&Value> {
        match &self.outcome {
            ToolOutcome::Success { value, .. } => Some(value),
            ToolOutcome::Failure(_) => None,
        }
    }

    /// The questions of a failure that needs a person's input, which a run that pauses keeps
    /// ([`super::ToolError::needs_input`]).
    pub fn needs_input(&self) -> Option<&std::sync::Arc<super::NeedsInput>> {
        self.input.as_ref()
    }

    /// The failure, if the call failed.
    pub fn error(&self) -> Option<&ToolFailure> {
        match &self.outcome {
            ToolOutcome::Success { .. } => None,
            ToolOutcome::Failure(failure) => Some(failure),
        }
    }

    /// `info.code` of a failure, if it has one.
    pub fn error_code(&self) -> Option<&str> {
        self.error()
            .and_then(|f| f.info.as_ref())
            .map(|i| i.code.as_str())
    }

    /// Whether the loop should end the turn after this call (only successes can).
    pub fn concludes_turn(&self) -> bool {
        matches!(
            self.outcome,
            ToolOutcome::Success {
                concludes_turn: true,
                ..
            }
        )
    }

    /// Host memory the result holds: its value's heap (as [`crate::json::heap_bytes`] counts
    /// it) or its failure's message, and the buffers of its content, metadata and contexts.
    pub(crate) fn held_bytes(&self) -> usize {
        let outcome = match &self.outcome {
            ToolOutcome::Success { value, .. } => crate::json::heap_bytes(value),
            ToolOutcome::Failure(failure) => failure.message.capacity(),
        };
        let contexts = self
            .additional_contexts
            .iter()
            .map(|context| blocks_bytes(&context.content))
            .fold(0usize, usize::saturating_add);
        outcome
            .saturating_add(blocks_bytes(&self.content))
            .saturating_add(self.meta.as_ref().map_or(0, crate::json::heap_bytes))
            .saturating_add(contexts)
    }

    /// The text blocks joined with newlines (handy for tests and plain-text hosts).
    pub fn text(&self) -> String {
        let texts: Vec<&str> = self
            .content
            .iter()
            .filter_map(|b| match b {
                ContentBlock::Text { text } => Some(text.as_str()),
                _ => None,
            })
            .collect();
        texts.join("\n")
    }
}

/// The buffers of `blocks`: each text, or each image's data and type.
pub(crate) fn blocks_bytes(blocks: &[ContentBlock]) -> usize {
    blocks
        .iter()
        .map(|block| match block {
            ContentBlock::Text { text } => text.capacity(),
            ContentBlock::Image { data, mime_type } => {
                data.capacity().saturating_add(mime_type.capacity())
            }
        })
        .fold(0usize, usize::saturating_add)
}

/// Equality of what the result says; which execution produced it does not count.
impl PartialEq for ToolExecutionResult {
    fn eq(&self, other: &Self) -> bool {
        self.outcome == other.outcome
            && self.content == other.content
            && self.meta == other.meta
            && self.additional_contexts == other.additional_contexts
    }
}

impl Serialize for ToolExecutionResult {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("isError", &self.is_error())?;
        match &self.outcome {
            ToolOutcome::Success { value, .. } => map.serialize_entry("value", value)?,
            ToolOutcome::Failure(failure) => map.serialize_entry("error", failure)?,
        }
        map.serialize_entry("content", &self.content)?;
        if let Some(meta) = &self.meta {
            map.serialize_entry("meta", meta)?;
        }
        if !self.additional_contexts.is_empty() {
            map.serialize_entry("additionalContexts", &self.additional_contexts)?;
        }
        if self.concludes_turn() {
            map.serialize_entry("concludesTurn", &true)?;
        }
        map.end()
    }
}
