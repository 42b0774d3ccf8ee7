//! Input a tool needs from a person before it can finish: the questions it asks, and the
//! answers a later call of the same tool carries back.
//!
//! A tool that cannot reach anyone to ask during its call (a run that pauses rather than
//! waits) fails with [`NeedsInput`]; a run that pauses keeps the questions with its pending
//! call, and its resume makes the call again with [`InputAnswers`].

use std::collections::BTreeMap;

use serde_json::Value;

/// Questions a call could not have answered while it ran.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NeedsInput {
    /// Each question by its key: an MCP form elicitation (`{mode, message, requestedSchema}`).
    pub questions: BTreeMap<String, Value>,
    /// What the tool needs again with the answers, opaque to everyone else; kept with the
    /// paused run, never shown to the program.
    pub state: Value,
    /// The arguments the call is made with again.
    pub arguments: Value,
}

/// The answers to a [`NeedsInput`]'s questions, for the call made again.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InputAnswers {
    /// Each answer by its question's key: an elicitation result (`{action, content?}`).
    pub responses: BTreeMap<String, Value>,
    /// The [`NeedsInput::state`] the questions came with.
    pub state: Value,
}
