//! Shared fixtures of the tool-pipeline suites.
#![allow(dead_code)]

use std::future::Future;
use std::sync::{Arc, Mutex};

use codemode_runtime::signal::AbortSignal;
use codemode_runtime::tools::schema::dsl::*;
use codemode_runtime::tools::{
    ContentBlock, ContextMessage, ContextSource, Registry, Schema, ToolDefinition, ToolError,
    ToolExecutionInput, ToolExecutionResult, ToolOutput, ToolRunContext,
};
use serde_json::{json, Value};

/// `{text?: string}` → returns `text` (default `"ok"`), rendered as one text block.
pub fn echo(name: &str) -> ToolDefinition {
    ToolDefinition::builder(name)
        .description(format!("{name} tool"))
        .parameters(
            Schema::parameters(Parameters::new().optional("text", string())).expect("params"),
        )
        .output(ToolOutput::text())
        .execute(|args, _ctx| async move {
            Ok(json!(args
                .get("text")
                .and_then(Value::as_str)
                .unwrap_or("ok")))
        })
        .build()
}

/// A tool with an open `json` output and the given body.
pub fn tool<F, Fut>(name: &str, body: F) -> ToolDefinition
where
    F: Fn(Arc<Value>, ToolRunContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Value, ToolError>> + Send + 'static,
{
    ToolDefinition::builder(name)
        .description(format!("{name} tool"))
        .output(ToolOutput::new(
            Schema::value(json()).expect("json"),
            |_, value| {
                Ok(vec![codemode_runtime::tools::ContentBlock::text(
                    value.to_string(),
                )])
            },
        ))
        .execute(body)
        .build()
}

pub fn input(name: &str, arguments: Value) -> ToolExecutionInput {
    ToolExecutionInput::new("call-1", name, arguments, AbortSignal::never())
}

pub async fn run(registry: &Registry, name: &str, arguments: Value) -> Arc<ToolExecutionResult> {
    registry.execute(input(name, arguments)).await
}

/// Registers `definition` at the root for the rest of the test.
pub fn keep(registry: &Registry, definition: ToolDefinition) {
    registry.register(definition, None).unwrap().keep();
}

/// A call to `name` that listens to `signal` (call id `"c"`).
pub fn signalled(name: &str, arguments: Value, signal: AbortSignal) -> ToolExecutionInput {
    ToolExecutionInput::new("c", name, arguments, signal)
}

/// A shared, ordered record of what happened, for stage-order assertions.
pub type Log = Arc<Mutex<Vec<String>>>;

pub fn log() -> Log {
    Arc::new(Mutex::new(Vec::new()))
}

pub fn push(log: &Log, entry: impl Into<String>) {
    log.lock().unwrap().push(entry.into());
}

pub fn entries(log: &Log) -> Vec<String> {
    log.lock().unwrap().clone()
}

pub fn ctx(text: &str) -> ContextMessage {
    ContextMessage {
        content: vec![ContentBlock::text(text)],
        source: ContextSource::plugin("test"),
    }
}

pub fn contexts(result: &ToolExecutionResult) -> Vec<String> {
    result
        .additional_contexts
        .iter()
        .map(|c| match &c.content[0] {
            ContentBlock::Text { text } => text.clone(),
            other => other.kind().to_owned(),
        })
        .collect()
}
