//! The tool set every subcommand builds the same way: a registry with the built-in tools and
//! the tools of the `--mcp` / `--config` servers, the timeout policy and the `--deny` /
//! `--allow` / `--ask` policy; and, for the commands that run programs, `run_code` over the
//! sandbox with the `--events` sink.

use std::path::PathBuf;
use std::sync::Arc;

use codemode_host::builtins;
use codemode_host::Durability;
use codemode_mcp::{self as mcp, Upstream, UpstreamSpec};
use codemode_runtime::run_code::prompt::{sdk_tools, SEARCH_TOOLS_NAME};
use codemode_runtime::run_code::{self, RunCodeConfig};
use codemode_runtime::tools::events::{self, EventSink, JsonlWriter};
use codemode_runtime::tools::plugins::{policy::Policy, timeout};
use codemode_runtime::tools::{
    AgentScope, ApprovalHook, RegistrationGuard, Registry, ToolMode, RUN_CODE_NAME,
};
use codemode_sdk_gen::ToolSchema;

use codemode_exec::backend::{Backend, Local};
use codemode_exec::sandbox::{Sandbox, SandboxOptions};
use codemode_exec::Exec;

use super::{BudgetArgs, ExecBackend, ToolArgs};

/// A registry ready for programs, and what keeps its registrations and servers alive.
pub struct ToolSession {
    pub registry: Registry,
    pub agent: AgentScope,
    pub policy: Policy,
    /// The execution tools' runtime, with `--exec`.
    pub exec: Option<Arc<Exec>>,
    /// Where the calls programs make are reported as they start and settle, besides
    /// `--events` (an MCP client's progress, `run --verbose`'s stderr).
    pub call_sinks: Vec<Arc<dyn EventSink>>,
    guards: Vec<RegistrationGuard>,
    /// Where the upstream servers' questions go (`Questions::answer_with`).
    pub questions: mcp::upstream::Questions,
    /// The upstream servers' tools, kept in step with their lists.
    registered: mcp::Registered,
    // Dropped last: the registry's tools hold links to these servers.
    upstreams: Vec<Upstream>,
}

/// Every upstream the flags name, `--config` first.
fn upstream_specs(args: &ToolArgs) -> Result<Vec<UpstreamSpec>, String> {
    let mut specs = Vec::new();
    if let Some(path) = &args.config {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("codemode: cannot read --config {}: {e}", path.display()))?;
        specs = UpstreamSpec::from_config(&text)
            .map_err(|e| format!("codemode: --config {}: {e}", path.display()))?;
    }
    for flag in &args.mcp {
        specs.push(UpstreamSpec::from_flag(flag).map_err(|e| format!("codemode: {e}"))?);
    }
    let mut names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
    names.sort_unstable();
    if let Some(pair) = names.windows(2).find(|pair| pair[0] == pair[1]) {
        return Err(format!(
            "codemode: two MCP servers are named \"{}\"",
            pair[0]
        ));
    }
    Ok(specs)
}

/// How the upstream servers that need OAuth are authorized to: with the tokens kept in the
/// state store (`--state`, else the default directory), and (under `run`, `resume` and `sdk`)
/// by the person at this terminal where none is kept.
pub fn authorization(args: &ToolArgs) -> mcp::upstream::oauth::Authorization {
    use mcp::upstream::oauth::{Authorization, Person};
    let credentials = open_credentials(args.state.as_deref())
        .map_err(|e| tracing::warn!("upstream authorizations cannot be kept: {e}"))
        .ok();
    let person = if args.person {
        Person::from_env()
    } else {
        None
    };
    Authorization::new(credentials, person, args.config.clone())
}

/// The credentials of the state store `state` names (a directory or an `s3://` store), else
/// of the default state directory.
pub fn open_credentials(
    state: Option<&std::path::Path>,
) -> Result<mcp::upstream::oauth::Credentials, String> {
    let url = state
        .and_then(|s| s.to_str())
        .filter(|s| s.starts_with("s3://"));
    if let Some(url) = url {
        return Durability::s3(url)
            .map(|durability| durability.credentials())
            .map_err(|e| e.to_string());
    }
    let dir = state
        .map(std::path::Path::to_path_buf)
        .or_else(Durability::default_dir)
        .ok_or("no state directory: pass --state DIR or set CODEMODE_STATE_DIR")?;
    mcp::upstream::oauth::Credentials::local(dir).map_err(|e| e.to_string())
}

/// What sandboxed commands must not see of codemode's: its state directories (the one named
/// and the default), its module cache, its token file and configuration, and what `--exec-hide`
/// adds. The state directories and the cache are made now where they are missing: a command
/// sees what is made beneath a directory it can read while it runs, and a hidden directory
/// stays hidden whatever is later written into it.
fn hidden_from_commands(args: &ToolArgs) -> Vec<PathBuf> {
    let mut hidden: Vec<PathBuf> = args.own_dirs.clone();
    hidden.extend(Durability::default_dir());
    hidden.extend(codemode_host::cache_dir());
    for dir in &hidden {
        let mut builder = std::fs::DirBuilder::new();
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        if let Err(error) = builder.recursive(true).create(dir) {
            tracing::warn!(
                "--exec sandbox: cannot make {} ahead of the commands that must not see it: {error}",
                dir.display()
            );
        }
    }
    hidden.extend(args.own_files.iter().cloned());
    hidden.extend(args.config.iter().cloned());
    hidden.extend(args.exec_hide.iter().cloned());
    hidden
}

/// What `--allow-host` and the other fetch flags ask for; `None` without `--allow-host`.
fn fetch_config(args: &ToolArgs) -> Result<Option<codemode_fetch::FetchConfig>, String> {
    if args.allow_host.is_empty() {
        let stray = [
            (args.allow_private_network, "--allow-private-network"),
            (!args.fetch_header.is_empty(), "--fetch-header"),
        ];
        if let Some((_, flag)) = stray.iter().find(|(given, _)| *given) {
            return Err(format!(
                "codemode: {flag} is for fetch, which is off: name the hosts it may reach with --allow-host"
            ));
        }
        return Ok(None);
    }
    let allow_hosts = args
        .allow_host
        .iter()
        .map(|entry| codemode_fetch::HostPattern::parse(entry))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("codemode: --allow-host {e}"))?;
    let mut headers = Vec::new();
    for spec in &args.fetch_header {
        let header = codemode_fetch::SecretHeader::from_spec(spec, |name| std::env::var(name).ok())
            .map_err(|e| format!("codemode: --fetch-header {e}"))?;
        let host = header.host().to_string();
        // A header for a host fetch cannot reach would never be sent: a mistake to say now.
        if !allow_hosts
            .iter()
            .any(|allowed| allowed.overlaps(header.host()))
        {
            return Err(format!(
                "codemode: --fetch-header {spec:?}: {host} is not among the --allow-host entries, so the header would never be sent"
            ));
        }
        headers.push(header);
    }
    Ok(Some(codemode_fetch::FetchConfig {
        allow_hosts,
        allow_private_network: args.allow_private_network,
        max_bytes: args.fetch_max_bytes,
        timeout: std::time::Duration::from_millis(args.fetch_timeout_ms),
        headers,
    }))
}

impl ToolSession {
    /// Registers the tools and policies `args` name (the built-ins only with `builtins`).
    /// Upstream servers that fail to start are reported on stderr; the rest serve. `Err` is a
    /// usage error, said for people.
    pub async fn new(args: &ToolArgs, builtins: bool, mode: ToolMode) -> Result<Self, String> {
        if !args.root.is_dir() {
            return Err(format!(
                "codemode: --root {} is not a directory",
                args.root.display()
            ));
        }
        let specs = upstream_specs(args)?;
        let registry = Registry::with_mode(mode);
        let mut guards = Vec::new();
        if builtins {
            guards.push(
                builtins::register(&registry, args.root.clone())
                    .map_err(|e| format!("codemode: cannot register the built-in tools: {e}"))?,
            );
        }
        let exec =
            match args.exec {
                None => None,
                Some(choice) => {
                    // Checked for both backends: a secret named here is refused, never dropped
                    // silently (the local backend passes everything but the secrets anyway).
                    codemode_exec::environment::check_pass_through(&args.exec_env)
                        .map_err(|e| format!("codemode: --exec-env: {e}"))?;
                    let backend: Arc<dyn Backend> = match choice {
                        ExecBackend::Local => Arc::new(Local),
                        ExecBackend::Sandbox => {
                            let options = SandboxOptions {
                                pass_env: args.exec_env.clone(),
                                hide: hidden_from_commands(args),
                                read_only: args.exec_read_only.clone(),
                                max_memory_bytes: args.exec_memory_mb << 20,
                                ..SandboxOptions::default()
                            };
                            let sandbox = Sandbox::with_options(&args.root, options)
                                .map_err(|e| format!("codemode: --exec sandbox: {e}"))?;
                            tracing::info!("--exec sandbox: {}", sandbox.protections());
                            Arc::new(sandbox)
                        }
                    };
                    let config = args.exec_config.clone().unwrap_or_default();
                    let exec = Exec::new(&args.root, backend, config)
                        .map_err(|e| format!("codemode: --exec: {e}"))?;
                    guards.push(codemode_exec::register(&registry, &exec).map_err(|e| {
                        format!("codemode: cannot register the execution tools: {e}")
                    })?);
                    Some(exec)
                }
            };
        if let Some(config) = fetch_config(args)? {
            guards.push(
                codemode_fetch::register(&registry, config)
                    .map_err(|e| format!("codemode: cannot register fetch: {e}"))?,
            );
        }
        let questions = mcp::upstream::Questions::default();
        let (upstreams, failures) =
            mcp::upstream::start_all(&specs, &questions, &authorization(args)).await;
        for failure in failures {
            tracing::warn!("{failure}; its tools are absent");
        }
        let (registered, notes) = mcp::register(&registry, &upstreams);
        for note in notes {
            tracing::warn!("{note}");
        }
        // An allow list names the tools; finding them under discovery stays possible.
        let mut policy = Policy::new().exempt(SEARCH_TOOLS_NAME);
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
            .filter(|name| name != RUN_CODE_NAME)
            .collect();
        for name in policy.names() {
            if known.iter().any(|k| k == name) {
                continue;
            }
            // A tool of a server that did not start: already reported.
            if name.starts_with("mcp__")
                && specs
                    .iter()
                    .any(|s| name.starts_with(&format!("mcp__{}__", s.name)))
            {
                continue;
            }
            return Err(format!(
                "codemode: the policy names unknown tool \"{name}\"; known tools: {}",
                known.join(", ")
            ));
        }
        guards.push(timeout::install(&registry));
        guards.push(policy.clone().install(&registry));
        Ok(Self {
            registry,
            agent: AgentScope::root(),
            policy,
            exec,
            call_sinks: Vec::new(),
            questions,
            guards,
            registered,
            upstreams,
        })
    }

    /// Counts the changes of the upstream servers' tools (a server started again with other
    /// tools, or one that said its tools changed).
    pub fn tool_changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.registered.changes()
    }

    /// Reads each upstream server's name and whether it is up, whenever it is called.
    pub fn upstream_health(&self) -> impl Fn() -> Vec<(String, bool)> + Send + Sync + 'static {
        let checks: Vec<_> = self
            .upstreams
            .iter()
            .map(|upstream| (upstream.name().to_owned(), upstream.liveness()))
            .collect();
        move || {
            checks
                .iter()
                .map(|(name, up)| (name.clone(), up()))
                .collect()
        }
    }

    /// Ends what the execution tools started (terminate then wait); call before exiting.
    pub async fn shutdown(&self) {
        if let Some(exec) = &self.exec {
            exec.shutdown().await;
        }
    }

    /// What the SDK declares: the agent's visible tools that the policy lets a program call.
    pub fn sdk_tools(&self) -> Vec<ToolSchema> {
        let mut tools = sdk_tools(&self.registry, Some(&self.agent));
        tools.retain(|tool| self.policy.permits(&tool.name));
        tools
    }

    /// Installs `run_code` over a sandbox with `budget`'s limits, the `--events` sink and an
    /// approval channel for `--ask`. `Err` is a usage error.
    pub fn install_run_code(
        &mut self,
        budget: &BudgetArgs,
        ask: &[String],
        approval: impl ApprovalHook,
        pausing: Option<Pausing>,
    ) -> Result<(), String> {
        let fit = Fit::checked(budget, pausing.as_ref())?;
        let runtime = super::prepare_runtime(budget.budgets(), budget.language())
            .map_err(|e| e.to_string())?;
        fit.apply(&runtime);
        self.install(Arc::new(runtime), budget, ask, approval, pausing)
    }

    /// Installs `run_code` like [`ToolSession::install_run_code`] over a sandbox prepared in
    /// the background, for a server that must answer before it is ready: runs wait for it.
    pub fn install_run_code_preparing(
        &mut self,
        budget: &BudgetArgs,
        ask: &[String],
        approval: impl ApprovalHook,
        pausing: Option<Pausing>,
    ) -> Result<codemode_host::Readiness, String> {
        let fit = Fit::checked(budget, pausing.as_ref())?;
        super::announce_preparation();
        let runtime = codemode_host::PreparingRuntime::start(
            budget.budgets(),
            budget.language(),
            move |runtime| fit.apply(runtime),
        )
        .map_err(|e| e.to_string())?;
        let readiness = runtime.readiness();
        self.install(Arc::new(runtime), budget, ask, approval, pausing)?;
        Ok(readiness)
    }

    /// A usage error when `flag` names a tool the session does not have.
    fn refuse_unknown_tools<'a>(
        &self,
        flag: &str,
        mut names: impl Iterator<Item = &'a String>,
    ) -> Result<(), String> {
        let known: Vec<String> = self
            .registry
            .definitions(Some(&self.agent))
            .iter()
            .map(|d| d.name().to_owned())
            .filter(|name| name != RUN_CODE_NAME)
            .collect();
        match names.find(|name| !known.contains(name)) {
            Some(name) => Err(format!(
                "codemode: {flag} names unknown tool \"{name}\"; known tools: {}",
                known.join(", ")
            )),
            None => Ok(()),
        }
    }

    fn install(
        &mut self,
        runtime: Arc<dyn codemode_runtime::code::CodeRuntime>,
        budget: &BudgetArgs,
        ask: &[String],
        approval: impl ApprovalHook,
        pausing: Option<Pausing>,
    ) -> Result<(), String> {
        let mut config = RunCodeConfig::default()
            .max_parallel_sub_calls(budget.max_parallel as usize)
            .preflight(!budget.no_preflight)
            .call_caps(budget.call_caps());
        self.refuse_unknown_tools(
            "--max-calls-per-tool",
            budget.max_calls_per_tool.iter().map(|(name, _)| name),
        )?;
        if let Some(pausing) = pausing {
            self.refuse_unknown_tools("--pause-on", pausing.pause_on.iter())?;
            config = config
                .pause_on(pausing.pause_on)
                .approve_on(pausing.approve_on);
        }
        let mut sinks = std::mem::take(&mut self.call_sinks);
        if let Some(path) = &budget.events {
            let file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .map_err(|e| format!("codemode: cannot open --events {}: {e}", path.display()))?;
            let sink: Arc<dyn EventSink> =
                Arc::new(JsonlWriter::new(std::io::BufWriter::new(file)));
            self.guards
                .push(events::record(&self.registry, sink.clone()));
            sinks.push(sink);
        }
        match sinks.len() {
            0 => {}
            1 => config = config.events(sinks.remove(0)),
            _ => config = config.events(Arc::new(events::Fanout(sinks))),
        }
        let installed = run_code::install(&self.registry, Some(runtime), config)
            .map_err(|e| format!("codemode: {e}"))?;
        self.guards.push(installed);
        if !ask.is_empty() {
            self.guards.push(self.registry.set_approval(approval));
        }
        Ok(())
    }
}

/// What a session's sandbox is given once made: the memory cap of its runs in progress, checked
/// before anything is prepared, and the store its paused runs go to.
struct Fit {
    memory_cap_mb: u64,
    durability: Option<Durability>,
}

impl Fit {
    fn checked(budget: &BudgetArgs, pausing: Option<&Pausing>) -> Result<Self, String> {
        let memory_cap_mb = budget.memory_cap_mb();
        codemode_host::check_memory_cap(&budget.budgets(), memory_cap_mb)
            .map_err(|e| format!("{e} (--max-memory-mb must be at least --memory-mb)"))?;
        Ok(Self {
            memory_cap_mb,
            durability: pausing.map(|p| p.durability.clone()),
        })
    }

    fn apply(self, runtime: &codemode_host::WasmCodeRuntime) {
        // Checked when this was made: cannot fail.
        let _ = runtime.limit_memory(self.memory_cap_mb);
        if let Some(durability) = self.durability {
            runtime.keep_paused_runs(durability);
        }
    }
}

/// The usage error of `--pause-on-ask` without `--ask`.
pub const PAUSE_ON_ASK_WITHOUT_ASK: &str = "codemode: --pause-on-ask turns the approvals --ask asks for into pauses: name the tools with --ask NAME";

/// What a session needs for runs that pause or resume.
pub struct Pausing {
    pub durability: Durability,
    pub pause_on: Vec<String>,
    /// Tools whose approvals pause the run (`--pause-on-ask`: the `--ask` tools).
    pub approve_on: Vec<String>,
}

impl Pausing {
    /// Opens the state store `--state` names (or the default directory); with `--pause-on-ask`, the `ask` tools' approvals
    /// pause the run.
    pub fn open(args: &super::PauseArgs, ask: &[String]) -> Result<Self, String> {
        let url = args
            .state
            .as_deref()
            .and_then(|s| s.to_str())
            .filter(|s| s.starts_with("s3://"));
        let durability = match url {
            Some(url) => Durability::s3(url),
            None => {
                let dir = args.state.clone().or_else(Durability::default_dir).ok_or(
                    "codemode: no state directory: pass --state DIR or set CODEMODE_STATE_DIR",
                )?;
                Durability::local(dir)
            }
        }
        .map_err(|e| format!("codemode: {e}"))?
        .ttl(args.state_ttl.0)
        .quota(args.state_quota_mb << 20);
        Ok(Self {
            durability,
            pause_on: args.pause_on.clone(),
            approve_on: if args.pause_on_ask {
                ask.to_vec()
            } else {
                Vec::new()
            },
        })
    }
}
