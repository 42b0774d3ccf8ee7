//! Prompt assembly, defined once: from a registry scope (and the runtime that will run its
//! programs) to what the model is shown.
//!
//! - [`prompt_sections`]: `tools:code-only` (order 99) and `tools:sdk` (order 150, in the
//!   tool-guidance band 100–199), as values a prompt assembler can order;
//! - [`wire_tools`]: the tools listed to the model as callable, per mode;
//! - [`run_code_description`]: `run_code`'s description when the SDK travels inside it (an MCP
//!   server has no system prompt), with progressive discovery past a token budget.
//!
//! The SDK text itself comes from `codemode_sdk_gen`, a pure function of schemas.

use codemode_sdk_gen::{estimate_tokens, render_sdk, tool_index, Language, ToolSchema};

use crate::code::CodeRuntime;
use crate::tools::{AgentScope, Registry, ToolMode, RUN_CODE_NAME};

use super::{Flavor, RunCodeError};

/// The estimated tokens of SDK past which `run_code`'s description lists the tools' names
/// only (progressive discovery), unless the server is told otherwise.
pub const DEFAULT_SDK_BUDGET: usize = 8_000;

/// Id of the section that tells the model `run_code` is its only directly callable tool.
pub const CODE_ONLY_SECTION_ID: &str = "tools:code-only";
/// Its position in the assembled prompt.
pub const CODE_ONLY_SECTION_ORDER: u32 = 99;
/// Id of the section that declares the SDK.
pub const SDK_SECTION_ID: &str = "tools:sdk";
/// Its position in the assembled prompt.
pub const SDK_SECTION_ORDER: u32 = 150;

/// The `tools:code-only` text in `code` mode.
pub const CODE_ONLY_RULE: &str = "`run_code` is the only tool you can call directly — a tool call naming any other tool fails. Reach every tool the SDK declares below from inside the program.";

/// The tool that returns typed declarations under progressive discovery.
pub const SEARCH_TOOLS_NAME: &str = "search_tools";

/// One section of a system prompt. An empty `text` contributes nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromptSection {
    /// The section's id, e.g. `tools:sdk`.
    pub id: &'static str,
    /// Where the section goes in the prompt; lower comes first.
    pub order: u32,
    /// The section's text.
    pub text: String,
}

/// `tools:code-only`: the rule text under `code`, empty otherwise.
pub fn code_only_section(mode: ToolMode) -> PromptSection {
    let text = match mode {
        ToolMode::Code => CODE_ONLY_RULE.to_owned(),
        ToolMode::Native | ToolMode::Both => String::new(),
    };
    PromptSection {
        id: CODE_ONLY_SECTION_ID,
        order: CODE_ONLY_SECTION_ORDER,
        text,
    }
}

/// `tools:sdk` for the calling scope's visible tools (without `run_code`): empty for a native
/// agent, the SDK text otherwise. Byte-identical for the same set of tools in any order.
pub fn sdk_section(mode: ToolMode, tools: &[ToolSchema], language: Language) -> PromptSection {
    let text = match mode {
        ToolMode::Native => String::new(),
        ToolMode::Code | ToolMode::Both => render_sdk(tools, language),
    };
    PromptSection {
        id: SDK_SECTION_ID,
        order: SDK_SECTION_ORDER,
        text,
    }
}

/// The tools `scope` sees, as the SDK declares them: `run_code` left out, output schemas in.
pub fn sdk_tools(registry: &Registry, scope: Option<&AgentScope>) -> Vec<ToolSchema> {
    registry
        .definitions(scope)
        .iter()
        .filter(|definition| definition.name() != RUN_CODE_NAME)
        .map(|definition| definition.schema(true))
        .collect()
}

/// `tools:code-only` and `tools:sdk` for `scope`: both empty for a native scope; otherwise the
/// rule (under `code` only) and the SDK of the scope's visible tools, in the runtime's
/// language. A non-native scope without a runtime is an error: assembling that prompt would
/// promise tools nothing can run.
pub fn prompt_sections(
    registry: &Registry,
    scope: Option<&AgentScope>,
    runtime: Option<&dyn CodeRuntime>,
) -> Result<Vec<PromptSection>, RunCodeError> {
    let mode = registry.mode_for(scope);
    if mode == ToolMode::Native {
        return Ok(vec![
            code_only_section(mode),
            sdk_section(mode, &[], Language::TypeScript),
        ]);
    }
    let runtime = runtime.ok_or(RunCodeError::MissingRuntime { mode })?;
    Ok(vec![
        code_only_section(mode),
        sdk_section(mode, &sdk_tools(registry, scope), runtime.language()),
    ])
}

/// The tools listed to the model as callable: every visible tool under `native`, `run_code`
/// alone under `code`, both (with `run_code` last) under `both`.
pub fn wire_tools(registry: &Registry, scope: Option<&AgentScope>) -> Vec<ToolSchema> {
    let run_code_only = registry.mode_for(scope) == ToolMode::Code;
    registry
        .definitions(scope)
        .iter()
        .filter(|definition| !run_code_only || definition.name() == RUN_CODE_NAME)
        .map(|definition| definition.schema(false))
        .collect()
}

/// `run_code`'s description with the SDK of `tools` in it, and whether progressive discovery
/// is on: past `budget` (estimated) tokens of SDK, the description carries the instructions
/// and one line per tool, and [`SEARCH_TOOLS_NAME`] returns the typed declarations.
pub fn run_code_description(
    flavor: &Flavor,
    tools: &[ToolSchema],
    budget: usize,
) -> (String, bool) {
    let language = flavor.language;
    let sdk = render_sdk(tools, language);
    if estimate_tokens(&sdk) <= budget {
        // The SDK brings the instructions; the lead only says where the declarations are.
        let lead = format!(
            "Execute a {} program against the tools declared at the end of this description.",
            language.title()
        );
        return (format!("{lead}\n\n{sdk}"), false);
    }
    let description = format!(
        "Execute a {} program against the tools listed at the end of this description.\n\n{}\n\n{}\nThese are the tools' names only: before calling one, call `{SEARCH_TOOLS_NAME}` with words from its name or purpose to get its typed declaration.",
        language.title(),
        language.instructions(),
        tool_index(tools)
    );
    (description, true)
}

#[cfg(test)]
mod tests {
    use super::super::{PYTHON_FLAVOR, TYPESCRIPT_FLAVOR};
    use super::*;

    #[test]
    fn code_only_rule_is_empty_unless_the_mode_is_code() {
        let code = code_only_section(ToolMode::Code);
        assert_eq!((code.id, code.order), ("tools:code-only", 99));
        assert!(code
            .text
            .starts_with("`run_code` is the only tool you can call directly — "));
        assert_eq!(code_only_section(ToolMode::Both).text, "");
        assert_eq!(code_only_section(ToolMode::Native).text, "");
    }

    #[test]
    fn sdk_section_is_empty_for_native_agents() {
        let sdk = sdk_section(ToolMode::Native, &[], Language::TypeScript);
        assert_eq!(
            (sdk.id, sdk.order, sdk.text.as_str()),
            ("tools:sdk", 150, "")
        );
        let both = sdk_section(ToolMode::Both, &[], Language::TypeScript);
        assert!(both.text.starts_with("## Writing code for run_code\n"));
    }

    #[test]
    fn the_discovery_description_carries_the_instructions_once() {
        let tools: Vec<ToolSchema> = (0..3)
            .map(|i| ToolSchema {
                name: format!("tool_{i}"),
                description: Some("Does a thing.".to_owned()),
                parameters: serde_json::json!({"type": "object"}),
                output: None,
            })
            .collect();
        let (full, discovery) = run_code_description(&TYPESCRIPT_FLAVOR, &tools, 1_000_000);
        assert!(!discovery);
        assert!(full.starts_with(
            "Execute a TypeScript program against the tools declared at the end of this description.\n\n## Writing code for run_code\n"
        ));
        assert_eq!(
            full.matches("Call `run_code` with two required arguments")
                .count(),
            1,
            "{full}"
        );
        assert!(!full.contains("system prompt"), "{full}");
        assert!(full.contains("  tool_2: JsonObject;\n"), "{full}");
        let (short, discovery) = run_code_description(&PYTHON_FLAVOR, &tools, 0);
        assert!(discovery);
        assert_eq!(
            short.matches(Language::Python.instructions()).count(),
            1,
            "{short}"
        );
        assert_eq!(
            short
                .matches("Call `run_code` with two required arguments")
                .count(),
            1,
            "{short}"
        );
        assert!(!short.contains("system prompt"), "{short}");
        assert!(short.contains("tool_2"), "{short}");
        assert!(!short.contains("```"), "{short}");
    }
}
