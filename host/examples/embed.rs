//! Embedding codemode in an agent host: two tools declared with the schema DSL, a guard, and
//! one program through `run_code`, typed, whose every call goes through the registry's
//! pipeline.
//! Run with `cargo run --release -p codemode-host --example embed`.

use std::sync::Arc;

use codemode_host::{Budgets, WasmCodeRuntime};
use codemode_runtime::run_code::{self, CodeRequest, RunCodeConfig};
use codemode_runtime::signal::AbortSignal;
use codemode_runtime::tools::schema::dsl::{null, number, string, Parameters};
use codemode_runtime::tools::{ContentBlock, Registry, Schema, ToolDefinition};
use codemode_runtime::tools::{ToolMode, ToolOutput};
use serde_json::{json, Value};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let text = |_: &Value, v: &Value| Ok(vec![ContentBlock::text(v.to_string())]);
    let add = ToolDefinition::builder("add")
        .description("Add two numbers.")
        .parameters(Schema::parameters(
            Parameters::new()
                .required("a", number())
                .required("b", number()),
        )?)
        .output(ToolOutput::new(Schema::value(number())?, text))
        .concurrency_safe(|_| true)
        .execute(|args, _ctx| async move {
            Ok(json!(
                args["a"].as_f64().unwrap_or(0.0) + args["b"].as_f64().unwrap_or(0.0)
            ))
        })
        .build();
    let delete = ToolDefinition::builder("delete_file")
        .description("Delete a file.")
        .parameters(Schema::parameters(
            Parameters::new().required("path", string()),
        )?)
        .output(ToolOutput::new(Schema::value(null())?, text))
        .execute(|_args, _ctx| async move { Ok(Value::Null) })
        .build();

    let registry = Registry::with_mode(ToolMode::Code);
    let _tools = registry.register_all([add, delete], None)?;
    let _guard = registry.guard(None, |call| {
        (call.name() == "delete_file").then(|| "deleting files is not allowed here".to_owned())
    });
    let runtime = Arc::new(WasmCodeRuntime::new(Budgets::default())?);
    let _run_code = run_code::install(&registry, Some(runtime), RunCodeConfig::default())?;

    let program = r#"
        const sum = await tools.add({ a: 2, b: 3 });
        try { await tools.delete_file({ path: "notes.txt" }); }
        catch (e) { console.log(`${e.toolName} refused: ${e.message}`); }
        return { sum };
    "#;
    let request = CodeRequest::new(
        "call-1",
        program,
        "Add numbers and try a delete",
        AbortSignal::never(),
    );
    let outcome = run_code::run(&registry, request).await;
    // What the model would read, then what the host reads typed.
    println!("{}", outcome.result.text());
    for call in outcome.run.iter().flat_map(|run| &run.calls) {
        println!("{} {}", call.tool, call.outcome.as_str());
    }
    Ok(())
}
