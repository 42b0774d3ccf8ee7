//! From a tool registry to what a prompt assembler needs for one agent scope: the tools the
//! SDK declares, the two prompt sections, and the tools listed on the wire, per mode.
//!
//! The SDK declares the scope's visible tools (never `run_code`), each with its parameter and
//! output schemas, in the language of the code runtime that will run the programs.

use codemode_runtime::code::CodeRuntime;
use codemode_runtime::tools::{self, AgentScope, Registry, ToolMode, RUN_CODE_NAME};

use crate::sdk::{Language, ToolSchema};
use crate::sections::{code_only_section, sdk_section, PromptSection};

/// Why the prompt cannot be assembled.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AssemblyError {
    /// A non-native mode with no code runtime to run programs.
    #[error("codemode: mode \"{mode}\" requires a code runtime — pass one to run_code::install (codemode_host::WasmCodeRuntime runs TypeScript in a wasm sandbox) or set the tools mode to \"native\"")]
    MissingRuntime {
        /// The scope's mode.
        mode: ToolMode,
    },
    /// The runtime's language has no SDK renderer.
    #[error("codemode: no SDK renderer registered for runtime language \"{language}\" (known: \"typescript\", \"python\")")]
    UnknownLanguage {
        /// What the runtime reported.
        language: String,
    },
}

/// The tools `scope` sees, as the SDK declares them: `run_code` left out, output schemas in.
pub fn sdk_tools(registry: &Registry, scope: Option<&AgentScope>) -> Vec<ToolSchema> {
    registry
        .definitions(scope)
        .iter()
        .filter(|definition| definition.name() != RUN_CODE_NAME)
        .map(|definition| ToolSchema {
            name: definition.name().to_owned(),
            description: Some(definition.description().to_owned()),
            parameters: codemode_runtime::json::clone_deep(definition.parameters().json()),
            output: definition
                .output()
                .map(|output| codemode_runtime::json::clone_deep(output.schema().json())),
        })
        .collect()
}

/// The SDK language for a runtime, or the error naming the ones that exist.
pub fn language_of(runtime: &dyn CodeRuntime) -> Result<Language, AssemblyError> {
    Language::from_name(runtime.language()).ok_or_else(|| AssemblyError::UnknownLanguage {
        language: runtime.language().to_owned(),
    })
}

/// `tools:code-only` (99) and `tools:sdk` (150) for `scope`: both empty for a native scope;
/// otherwise the rule (under `code` only) and the SDK of the scope's visible tools, in the
/// runtime's language. A non-native scope without a runtime, or with a runtime of an unknown
/// language, is an error: assembling that prompt would promise tools nothing can run.
pub fn prompt_sections(
    registry: &Registry,
    scope: Option<&AgentScope>,
    runtime: Option<&dyn CodeRuntime>,
) -> Result<Vec<PromptSection>, AssemblyError> {
    let mode = registry.mode_for(scope);
    if mode == ToolMode::Native {
        return Ok(vec![
            code_only_section(mode),
            sdk_section(mode, &[], Language::TypeScript),
        ]);
    }
    let runtime = runtime.ok_or(AssemblyError::MissingRuntime { mode })?;
    let language = language_of(runtime)?;
    Ok(vec![
        code_only_section(mode),
        sdk_section(mode, &sdk_tools(registry, scope), language),
    ])
}

/// The tools listed to the model as callable: every visible tool under `native`, `run_code`
/// alone under `code`, both (with `run_code` last) under `both`.
pub fn wire_tools(registry: &Registry, scope: Option<&AgentScope>) -> Vec<tools::ToolSchema> {
    let visible = registry.schemas(scope);
    match registry.mode_for(scope) {
        ToolMode::Code => visible
            .into_iter()
            .filter(|schema| schema.name == RUN_CODE_NAME)
            .collect(),
        ToolMode::Native | ToolMode::Both => visible,
    }
}
