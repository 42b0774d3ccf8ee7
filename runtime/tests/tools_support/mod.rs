//! Shared fixtures of the tool-pipeline suites.
#![allow(dead_code)]

use std::future::Future;
use std::sync::Arc;

use codemode_runtime::signal::AbortSignal;
use codemode_runtime::tools::schema::dsl::*;
use codemode_runtime::tools::{
    Registry, Schema, ToolDefinition, ToolError, ToolExecutionInput, ToolExecutionResult,
    ToolOutput, ToolRunContext,
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
