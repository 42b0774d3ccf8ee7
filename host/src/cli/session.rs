//! The tool set every subcommand builds the same way: a Code Mode registry with the built-in
//! tools, the timeout policy and the `--deny` / `--allow` / `--ask` policy, and one agent scope
//! that calls through it.

use codemode_host::builtins;
use codemode_runtime::tools::plugins::{policy::Policy, timeout};
use codemode_runtime::tools::{AgentScope, RegistrationGuard, Registry, ToolMode};
use codemode_sdk_gen::{sdk_tools, ToolSchema};

use super::ToolArgs;

/// A registry ready for programs, and what keeps its registrations alive.
pub struct ToolSession {
    pub registry: Registry,
    pub agent: AgentScope,
    pub policy: Policy,
    _guards: Vec<RegistrationGuard>,
}

impl ToolSession {
    /// Registers the tools and policies `args` name. `Err` is a usage error, said for people.
    pub fn new(args: &ToolArgs) -> Result<Self, String> {
        if !args.root.is_dir() {
            return Err(format!(
                "codemode: --root {} is not a directory",
                args.root.display()
            ));
        }
        let registry = Registry::with_mode(ToolMode::Code);
        let tools = builtins::register(&registry, args.root.clone())
            .map_err(|e| format!("codemode: cannot register the built-in tools: {e}"))?;
        let mut policy = Policy::new();
        for name in &args.deny {
            policy = policy.deny(name);
        }
        for name in &args.allow {
            policy = policy.allow(name);
        }
        for name in &args.ask {
            policy = policy.ask(name);
        }
        let known: Vec<String> = registry
            .schemas(None)
            .into_iter()
            .map(|schema| schema.name)
            .collect();
        if let Some(unknown) = policy.names().find(|name| !known.iter().any(|k| k == name)) {
            return Err(format!(
                "codemode: the policy names unknown tool \"{unknown}\"; known tools: {}",
                known.join(", ")
            ));
        }
        let guards = vec![
            tools,
            timeout::install(&registry),
            policy.clone().install(&registry),
        ];
        Ok(Self {
            registry,
            agent: AgentScope::root(),
            policy,
            _guards: guards,
        })
    }

    /// What the SDK declares: the agent's visible tools that the policy lets a program call.
    pub fn sdk_tools(&self) -> Vec<ToolSchema> {
        let mut tools = sdk_tools(&self.registry, Some(&self.agent));
        tools.retain(|tool| self.policy.permits(&tool.name));
        tools
    }
}
