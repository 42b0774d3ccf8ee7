//! Progressive discovery: past the SDK budget, `run_code`'s description lists the tools by
//! name and `search_tools` finds their declarations. The client calls it as an MCP tool; a
//! program calls it as `tools.search_tools({ query, limit? })` and gets the same tools as
//! data (name, description, declaration), all of them callable in the same program.

use std::sync::Weak;

use codemode_runtime::run_code::prompt::SEARCH_TOOLS_NAME;
use codemode_runtime::tools::{ContentBlock, Schema, ToolDefinition, ToolError, ToolOutput};
use codemode_sdk_gen::{render_declarations, search, ToolSchema};
use serde_json::{json, Value};

use super::server::Served;

/// Most tools one search returns.
pub(super) const MAX_SEARCH_LIMIT: u64 = 50;
const DEFAULT_SEARCH_LIMIT: u64 = 10;

/// `search_tools`' arguments: a query, and at most how many tools.
pub(super) fn parameters() -> Value {
    json!({
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "Words from the tool's name or purpose."},
            "limit": {"type": "integer", "minimum": 1, "maximum": MAX_SEARCH_LIMIT, "description": "Most tools to return (default 10)."},
        },
        "required": ["query"],
    })
}

/// The query in `arguments` and the tools among `tools` that match it, best first; the
/// error says what is wrong with the arguments.
pub(super) fn found<'t, 'a>(
    tools: &'t [ToolSchema],
    arguments: &'a Value,
) -> Result<(&'a str, Vec<&'t ToolSchema>), String> {
    let Some(query) = arguments.get("query").and_then(Value::as_str) else {
        return Err(format!("{SEARCH_TOOLS_NAME} needs a string \"query\""));
    };
    let limit = arguments
        .get("limit")
        .and_then(Value::as_u64)
        .unwrap_or(DEFAULT_SEARCH_LIMIT)
        .clamp(1, MAX_SEARCH_LIMIT) as usize;
    Ok((query, search(tools, query, limit)))
}

/// `search_tools` as a tool programs call, answering from `served`'s current listing.
pub(super) fn definition(served: Weak<Served>) -> ToolDefinition {
    let output = json!({
        "type": "array",
        "items": {
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "description": {"type": "string"},
                "declaration": {"type": "string"},
            },
            "required": ["name", "description", "declaration"],
        },
    });
    // Both literals are in the schema subset (the discovery e2e test registers this tool).
    let parameters = Schema::raw(parameters()).unwrap_or_else(|_| Schema::empty_parameters());
    let output = Schema::raw(output).unwrap_or_else(|_| Schema::empty_parameters());
    ToolDefinition::builder(SEARCH_TOOLS_NAME)
        .description("Find the tools a program can call by words from their name or purpose: their names, descriptions and typed declarations, best first.")
        .parameters(parameters)
        .output(ToolOutput::new(output, |_args, value| {
            Ok(vec![ContentBlock::text(codemode_runtime::json::to_string(value))])
        }))
        .concurrency_safe(|_| true)
        .execute(move |args, _ctx| {
            let served = served.clone();
            async move {
                let Some(served) = served.upgrade() else {
                    return Err(ToolError::new("search_tools: the server is gone"));
                };
                let listing = served.listing();
                let tools = listing.discovery().unwrap_or_default();
                let (_, found) = found(tools, &args).map_err(ToolError::new)?;
                let language = served.language();
                Ok(Value::Array(
                    found
                        .into_iter()
                        .map(|tool| {
                            json!({
                                "name": tool.name,
                                "description": tool.description.clone().unwrap_or_default(),
                                "declaration": render_declarations(std::slice::from_ref(tool), language),
                            })
                        })
                        .collect(),
                ))
            }
        })
        .build()
}
