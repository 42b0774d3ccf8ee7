//! Prompt assembly from a registry: the wire tool list per mode, the `tools:code-only` and
//! `tools:sdk` sections per scope, the renderer picked by the runtime's language, and the
//! `run_code` texts that go with it.

use std::sync::Arc;

use codemode_runtime::code::{
    BoxFuture, CodeRuntime, Language, RunRejection, RunRequest, RunResult,
};
use codemode_runtime::run_code::prompt::{prompt_sections, sdk_tools, wire_tools};
use codemode_runtime::run_code::{
    self, RunCodeConfig, RunCodeError, PYTHON_FLAVOR, TYPESCRIPT_FLAVOR,
};
use codemode_runtime::tools::schema::dsl::{string, Parameters};
use codemode_runtime::tools::{
    AgentScope, RegistrationGuard, Registry, Restriction, Schema, ToolDefinition, ToolMode,
    ToolOutput, RUN_CODE_NAME,
};
use serde_json::json;

/// A runtime that only describes itself: assembly reads its language and never runs it.
struct Described(Language);

impl CodeRuntime for Described {
    fn language(&self) -> Language {
        self.0
    }
    fn isolation(&self) -> &str {
        "none"
    }
    fn run(&self, _: RunRequest) -> BoxFuture<'_, Result<RunResult, RunRejection>> {
        Box::pin(async { Err(RunRejection::Disposed) })
    }
    fn dispose(&self) -> BoxFuture<'_, ()> {
        Box::pin(async {})
    }
}

fn echo() -> ToolDefinition {
    ToolDefinition::builder("echo")
        .description("Echo the text.")
        .parameters(Schema::parameters(Parameters::new().required("text", string())).unwrap())
        .output(ToolOutput::text())
        .execute(|args, _| async move { Ok(args["text"].clone()) })
        .build()
}

fn registry(mode: ToolMode, language: Option<Language>) -> (Registry, Vec<RegistrationGuard>) {
    let registry = Registry::with_mode(mode);
    let tool = registry.register(echo(), None).unwrap();
    let runtime = language.map(|l| Arc::new(Described(l)) as Arc<dyn CodeRuntime>);
    let transport = run_code::install(&registry, runtime, RunCodeConfig::default()).unwrap();
    (registry, vec![tool, transport])
}

fn names(registry: &Registry, scope: Option<&AgentScope>) -> Vec<String> {
    wire_tools(registry, scope)
        .into_iter()
        .map(|t| t.name)
        .collect()
}

#[test]
fn a_native_scope_lists_every_tool_and_no_sdk_without_needing_a_runtime() {
    let (registry, _keep) = registry(ToolMode::Native, None);
    assert_eq!(names(&registry, None), vec!["echo"]);
    let sections = prompt_sections(&registry, None, None).unwrap();
    assert!(sections.iter().all(|s| s.text.is_empty()));
}

#[test]
fn a_code_scope_lists_run_code_alone_and_the_sdk_declares_the_rest() {
    let runtime = Described(Language::TypeScript);
    let (registry, _keep) = registry(ToolMode::Code, Some(Language::TypeScript));
    assert_eq!(names(&registry, None), vec![RUN_CODE_NAME]);
    let sections = prompt_sections(&registry, None, Some(&runtime)).unwrap();
    assert_eq!(
        sections.iter().map(|s| (s.id, s.order)).collect::<Vec<_>>(),
        vec![("tools:code-only", 99), ("tools:sdk", 150)]
    );
    assert!(sections[0].text.starts_with("`run_code` is the only tool"));
    let sdk = &sections[1].text;
    assert!(
        sdk.contains("  /** Echo the text. */\n  echo: {\n    text: string;\n  };"),
        "{sdk}"
    );
    assert!(
        sdk.contains("  echo: string;"),
        "the output schema is declared: {sdk}"
    );
    assert!(!sdk.contains("run_code:"), "{sdk}");
    let again = prompt_sections(&registry, None, Some(&runtime)).unwrap();
    assert_eq!(again, sections, "assembly is byte-identical every time");
}

#[test]
fn both_lists_the_tools_then_run_code_and_the_code_only_rule_is_empty() {
    let runtime = Described(Language::TypeScript);
    let (registry, _keep) = registry(ToolMode::Both, Some(Language::TypeScript));
    assert_eq!(names(&registry, None), vec!["echo", RUN_CODE_NAME]);
    let sections = prompt_sections(&registry, None, Some(&runtime)).unwrap();
    assert_eq!(sections[0].text, "");
    assert!(sections[1].text.contains("echo: {"));
}

#[test]
fn run_code_stays_outside_scoped_allow_and_deny_filters() {
    for mode in [ToolMode::Code, ToolMode::Both] {
        let (registry, _keep) = registry(mode, Some(Language::TypeScript));
        let agent = AgentScope::root();
        let _mask = registry
            .restrict(
                &agent,
                Restriction {
                    allow: None,
                    deny: Some(vec!["echo".into()]),
                },
            )
            .unwrap();
        assert_eq!(names(&registry, Some(&agent)), vec![RUN_CODE_NAME]);
        assert!(sdk_tools(&registry, Some(&agent)).is_empty());
        let refused = registry.restrict(
            &agent,
            Restriction {
                allow: Some(vec![RUN_CODE_NAME.into()]),
                deny: None,
            },
        );
        assert!(refused.is_err());
    }
}

#[test]
fn assembly_refuses_without_a_runtime() {
    let (registry, _keep) = registry(ToolMode::Code, None);
    let missing = prompt_sections(&registry, None, None).unwrap_err();
    assert_eq!(
        missing,
        RunCodeError::MissingRuntime {
            mode: ToolMode::Code
        }
    );
    assert!(missing
        .to_string()
        .contains("mode \"code\" requires a code runtime"));
}

#[test]
fn the_runtime_language_picks_the_sdk_and_the_run_code_texts() {
    let (registry, _keep) = registry(ToolMode::Code, Some(Language::Python));
    let sections = prompt_sections(&registry, None, Some(&Described(Language::Python))).unwrap();
    assert!(
        sections[1].text.contains("```python"),
        "{}",
        sections[1].text
    );
    let run_code = &registry.schemas(None)[1];
    assert_eq!(run_code.name, RUN_CODE_NAME);
    assert_eq!(
        run_code.description.as_deref(),
        Some(PYTHON_FLAVOR.description)
    );
    assert_eq!(
        run_code.parameters["properties"]["code"]["description"],
        PYTHON_FLAVOR.code_description
    );
}

#[test]
fn without_a_runtime_run_code_speaks_typescript_and_no_parallelism_is_refused() {
    let (registry, _keep) = registry(ToolMode::Code, None);
    let schemas = registry.schemas(None);
    assert_eq!(
        schemas[1].description.as_deref(),
        Some(TYPESCRIPT_FLAVOR.description)
    );
    let other = Registry::with_mode(ToolMode::Code);
    let zero = run_code::install(
        &other,
        None,
        RunCodeConfig::default().max_parallel_sub_calls(0),
    )
    .unwrap_err();
    assert_eq!(zero, RunCodeError::NoParallelSubCalls);
    assert_eq!(
        zero.to_string(),
        "maxParallelSubCalls must be a positive integer"
    );
}

#[test]
fn run_code_has_the_reference_schema_exactly() {
    let (registry, _keep) = registry(ToolMode::Code, Some(Language::TypeScript));
    let schema = &registry.schemas(None)[1];
    assert_eq!(
        serde_json::to_string(&schema.parameters).unwrap(),
        serde_json::to_string(&json!({
            "type": "object",
            "properties": {
                "code": {"type": "string", "description": "The program: the body of an async TypeScript function."},
                "description": {"type": "string", "description": run_code::DESCRIPTION_PARAMETER},
            },
            "required": ["code", "description"],
        }))
        .unwrap()
    );
    assert!(schema.parameters.get("additionalProperties").is_none());
}

#[test]
fn one_agent_can_present_code_inside_a_native_deployment() {
    let runtime = Described(Language::TypeScript);
    let (registry, _keep) = registry(ToolMode::Native, Some(Language::TypeScript));
    let agent = AgentScope::root();
    let nested = agent.child();
    let _mode = registry.present_as(&agent, ToolMode::Code).unwrap();
    assert_eq!(names(&registry, None), vec!["echo"]);
    assert_eq!(names(&registry, Some(&agent)), vec![RUN_CODE_NAME]);
    assert_eq!(
        names(&registry, Some(&nested)),
        vec![RUN_CODE_NAME],
        "inherited"
    );
    let sections = prompt_sections(&registry, Some(&agent), Some(&runtime)).unwrap();
    assert!(sections[1].text.contains("echo: {"));
    let native = prompt_sections(&registry, None, None).unwrap();
    assert!(native.iter().all(|s| s.text.is_empty()));
    let opt_out = nested.child();
    let _native = registry.present_as(&opt_out, ToolMode::Native).unwrap();
    assert_eq!(names(&registry, Some(&opt_out)), vec!["echo"]);
}
