//! Flag parsing for every subcommand (names, help, defaults) and the exit-code contract:
//! 0 success, 1 the program failed, 2 a usage or I/O error, 3 the program paused.

mod approval;
mod auth;
#[cfg(feature = "bench")]
mod bench;
mod http;
mod mcp;
mod metrics;
mod prepare;
mod probes;
mod resume;
mod run;
mod sdk;
mod session;
mod telemetry;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use codemode_runtime::ledger::MIN_OUTPUT_BYTES;
use codemode_runtime::run_code::DEFAULT_MAX_PARALLEL_SUB_CALLS;
use codemode_sdk_gen::Language;

use codemode_host::config;
use codemode_mcp::sessions;

use telemetry::LogFormat;

pub const EXIT_OK: u8 = 0;
pub const EXIT_PROGRAM_FAILED: u8 = 1;
pub const EXIT_USAGE: u8 = 2;
pub const EXIT_PAUSED: u8 = 3;

#[derive(Parser)]
#[command(
    name = "codemode",
    version,
    about = "Run TypeScript programs against tools in a wasm sandbox"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// How log records are written on stderr: a line of text each, or a JSON object each
    /// (which records: RUST_LOG, default `warn`).
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
}

#[derive(Subcommand)]
enum Command {
    /// Run a program (the body of an async TypeScript function) through `run_code`, with the
    /// built-in tools.
    Run(RunArgs),
    /// Continue a run that paused (`run --pause-on`), answering the calls it waits on.
    Resume(ResumeArgs),
    /// Print the `tools:sdk` prompt section for the tools a program could call.
    Sdk(SdkArgs),
    /// Serve `run_code` (and, with `--mode both`, every tool a program may call) to MCP clients.
    Mcp(McpArgs),
    /// Authorize to upstream MCP servers that need OAuth, and forget their authorizations.
    Auth(auth::AuthArgs),
    /// Prepare the sandbox ahead of its first use (for container images and CI): build and
    /// cache the pre-initialised guest, showing progress.
    Prepare,
    /// Measure the standard workloads in process.
    #[cfg(feature = "bench")]
    Bench(BenchArgs),
}

/// Which tools a program sees and may call; shared by `run` and `sdk`.
#[derive(Args)]
pub struct ToolArgs {
    /// Directory `read_file` and `list_dir` are confined to.
    #[arg(long, default_value = ".")]
    pub root: PathBuf,
    /// Deny calls to this tool (repeatable): the program gets a ToolCallError with the reason.
    #[arg(long = "deny", value_name = "NAME")]
    pub deny: Vec<String>,
    /// Allow only these tools (repeatable); calls to any other tool are denied.
    #[arg(long = "allow", value_name = "NAME")]
    pub allow: Vec<String>,
    /// Ask before each call to this tool (repeatable): on the controlling terminal, or the MCP
    /// client for `codemode mcp`; with no way to ask, the call is denied.
    #[arg(long = "ask", value_name = "NAME")]
    pub ask: Vec<String>,
    /// Start an MCP server over stdio and offer its tools as `mcp__NAME__<tool>` (repeatable);
    /// COMMAND is split like a shell would, without expansions.
    #[arg(long = "mcp", value_name = "NAME=COMMAND")]
    pub mcp: Vec<String>,
    /// Read MCP servers from a `{"mcpServers": {NAME: {command, args, env} or {url, headers}}}` file.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Add the execution tools (`bash`, `job_output`, `job_list`, `job_kill` and the six
    /// `terminal_*` tools: open, send, read, signal, close, list) with --root as
    /// their workspace, on a backend: `local` (what `--exec` alone means) or `sandbox`
    /// (writes confined to the workspace and a private temporary directory, no network).
    #[arg(long, value_name = "BACKEND", num_args = 0..=1, default_missing_value = "local")]
    pub exec: Option<ExecBackend>,
    /// Pass this environment variable to sandboxed commands (repeatable). They otherwise get
    /// only PATH, HOME, LANG, LANGUAGE, LC_*, TERM, USER and TMPDIR; codemode's own secrets
    /// (CODEMODE_STATE_KEY, CODEMODE_MCP_TOKEN, AWS credentials) reach no command.
    #[arg(long = "exec-env", value_name = "NAME")]
    pub exec_env: Vec<String>,
    /// Hide this file or directory from sandboxed commands (repeatable), besides codemode's
    /// own files (state directory, module cache, token file, --config) and the usual
    /// credentials (~/.ssh, ~/.aws, ~/.gnupg, ~/.docker, ~/.kube, ~/.netrc and others).
    #[arg(long = "exec-hide", value_name = "PATH")]
    pub exec_hide: Vec<PathBuf>,
    /// Let sandboxed commands read this path where the sandbox would leave it out (a
    /// toolchain in root's home, which commands of a codemode running as root cannot see).
    #[arg(long = "exec-ro", value_name = "PATH")]
    pub exec_read_only: Vec<PathBuf>,
    /// With --exec sandbox, where codemode runs as root and can write the kernel's cgroups:
    /// the most memory (MiB) the processes of one command may use together (default 4096).
    #[arg(long = "exec-memory-mb", value_name = "MIB", default_value_t = 4096, value_parser = clap::value_parser!(u64).range(16..=1_048_576))]
    pub exec_memory_mb: u64,
    /// Turn on the `fetch` tool (and a TypeScript program's global `fetch`) for this host
    /// (repeatable): `api.example.com`, `*.example.com` (its subdomains), `host:port`. Every
    /// redirect is checked again.
    #[arg(long = "allow-host", value_name = "HOST")]
    pub allow_host: Vec<String>,
    /// Let `fetch` reach loopback, private, link-local and cloud-metadata addresses, which it
    /// otherwise refuses whatever name leads there.
    #[arg(long = "allow-private-network")]
    pub allow_private_network: bool,
    /// Most bytes of a fetch's request body and of its response body (a longer response is
    /// cut and marked truncated).
    #[arg(long = "fetch-max-bytes", value_name = "BYTES", default_value_t = codemode_fetch::DEFAULT_MAX_BYTES, value_parser = clap::value_parser!(u64).range(1..=1 << 30))]
    pub fetch_max_bytes: u64,
    /// Deadline of one fetch in milliseconds, redirects and body included.
    #[arg(long = "fetch-timeout-ms", value_name = "MS", default_value_t = 30_000, value_parser = clap::value_parser!(u64).range(1..=3_600_000))]
    pub fetch_timeout_ms: u64,
    /// Add a header to fetches of HOST (in --allow-host's syntax) from the environment
    /// variable ENV_VAR (repeatable); the program never sees its value.
    #[arg(long = "fetch-header", value_name = "HOST=NAME:ENV_VAR")]
    pub fetch_header: Vec<String>,
    /// codemode's own directories and files that a subcommand names (its state directory,
    /// its token file): hidden from sandboxed commands.
    #[arg(skip)]
    pub own_dirs: Vec<PathBuf>,
    #[arg(skip)]
    pub own_files: Vec<PathBuf>,
    /// Whether a person at this terminal may be asked to authorize to an upstream server
    /// (`run`, `resume`, `sdk`; not `mcp`, whose person is its client's).
    #[arg(skip)]
    pub person: bool,
    /// The state store a subcommand names (`--state`), where upstream authorizations are kept.
    #[arg(skip)]
    pub state: Option<PathBuf>,
    /// The execution tools' limits, when a subcommand sets them (`mcp --max-jobs`, …).
    #[arg(skip)]
    pub exec_config: Option<codemode_exec::ExecConfig>,
}

/// Where the execution tools start processes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ExecBackend {
    Local,
    Sandbox,
}

/// What one run may spend, and how its calls are scheduled and recorded; shared by `run` and
/// `mcp`.
#[derive(Args)]
pub struct BudgetArgs {
    /// Compute budget in milliseconds of busy time.
    #[arg(long, default_value_t = config::DEFAULT_COMPUTE_MS, value_parser = clap::value_parser!(u64).range(1..=config::MAX_COMPUTE_MS))]
    pub compute_ms: u64,
    /// Wall-clock budget in milliseconds, waits included.
    #[arg(long, default_value_t = config::DEFAULT_WALL_MS, value_parser = clap::value_parser!(u64).range(1..=config::MAX_WALL_MS))]
    pub wall_ms: u64,
    /// Output cap in bytes (JSON of logs plus result or error message).
    #[arg(long, default_value_t = config::DEFAULT_MAX_OUTPUT_BYTES, value_parser = clap::value_parser!(u64).range(MIN_OUTPUT_BYTES..=config::MAX_OUTPUT_BYTES))]
    pub max_output_bytes: u64,
    /// Sandbox memory limit in MiB.
    #[arg(long, default_value_t = config::DEFAULT_MEMORY_MB, value_parser = clap::value_parser!(u64).range(1..=config::MAX_MEMORY_MB))]
    pub memory_mb: u64,
    /// Most memory, in MiB, that the runs in progress may hold at once (the sum of their
    /// --memory-mb budgets); a run beyond it waits for others to end, within its wall budget,
    /// then fails as a timeout. Default: half the machine's memory, and at least --memory-mb.
    #[arg(long, value_name = "MIB", value_parser = clap::value_parser!(u64).range(1..=config::MAX_MEMORY_CAP_MB))]
    pub max_memory_mb: Option<u64>,
    /// Most tool calls of one program running at once (concurrency-safe tools only).
    #[arg(long, default_value_t = DEFAULT_MAX_PARALLEL_SUB_CALLS as u32, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_parallel: u32,
    /// Append the session events (tool calls, results, sub-call dispatches) to FILE as JSONL.
    #[arg(long, value_name = "FILE")]
    pub events: Option<PathBuf>,
    /// Run programs without checking their tool calls first. By default a program whose calls
    /// cannot succeed (an unknown tool, an argument literal its schema refuses) is refused
    /// before anything runs, with every such call and its line.
    #[arg(long)]
    pub no_preflight: bool,
    /// Most tool calls one program may make. Past it the run stops as an `exception` with cause
    /// `calls`; the calls it made are in its record. Default: the sandbox's ceiling, 100000.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_calls: Option<u64>,
    /// Most calls of one tool a program may make, as NAME=N (repeatable); past it the run
    /// stops as with --max-calls.
    #[arg(long, value_name = "NAME=N", value_parser = parse_tool_cap)]
    pub max_calls_per_tool: Vec<(String, u64)>,
    /// Language of the programs: typescript, or python (Monty, in its own sandboxed guest).
    /// `codemode run` takes python for a file named `*.py`.
    #[arg(long, value_enum)]
    pub lang: Option<Language>,
}

impl BudgetArgs {
    /// The caps --max-calls and --max-calls-per-tool set.
    pub fn call_caps(&self) -> codemode_runtime::code::CallCaps {
        codemode_runtime::code::CallCaps {
            total: self.max_calls,
            per_function: self.max_calls_per_tool.iter().cloned().collect(),
        }
    }

    /// The language programs are written in (--lang; TypeScript by default).
    pub fn language(&self) -> Language {
        self.lang.unwrap_or(Language::TypeScript)
    }

    /// The sandbox budgets these flags set.
    pub fn budgets(&self) -> codemode_host::Budgets {
        codemode_host::Budgets {
            compute_ms: self.compute_ms,
            wall_ms: self.wall_ms,
            max_output_bytes: self.max_output_bytes,
            memory_mb: self.memory_mb,
        }
    }

    /// The memory cap --max-memory-mb sets, or its default: half the machine's memory, at least
    /// one run's budget, 2 GiB where the machine's memory is unknown.
    pub fn memory_cap_mb(&self) -> u64 {
        self.max_memory_mb.unwrap_or_else(|| {
            physical_memory_mb()
                .map_or(config::MEMORY_CAP_MB_WHEN_UNKNOWN, |total| total / 2)
                .max(self.memory_mb)
        })
    }
}

/// `NAME=N` of --max-calls-per-tool.
fn parse_tool_cap(text: &str) -> Result<(String, u64), String> {
    let (name, cap) = text
        .rsplit_once('=')
        .filter(|(name, _)| !name.is_empty())
        .ok_or_else(|| format!("expected NAME=N, got {text:?}"))?;
    let cap: u64 = cap
        .parse()
        .ok()
        .filter(|n| *n >= 1)
        .ok_or_else(|| format!("expected a count of at least 1 after {name}=, got {cap:?}"))?;
    Ok((name.to_owned(), cap))
}

/// The machine's memory in MiB (`MemTotal`), where the system says.
fn physical_memory_mb() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line
        .trim_start_matches("MemTotal:")
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kib / 1024)
}

/// How `codemode mcp` presents tools.
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ServeMode {
    /// `run_code` only (plus `search_tools` past the SDK budget).
    Code,
    /// `run_code` and, natively, every tool a program may call (upstream, built-in, execution).
    Both,
}

#[derive(Args)]
pub struct McpArgs {
    /// Serve streamable HTTP at http://ADDR/mcp instead of stdio (`127.0.0.1:0` picks a port;
    /// the address is printed on stderr).
    #[arg(long, value_name = "ADDR")]
    pub http: Option<String>,
    /// Host names HTTP requests may name besides localhost (repeatable), e.g. behind a proxy.
    #[arg(long = "allowed-host", value_name = "HOST")]
    pub allowed_hosts: Vec<String>,
    /// With --http: clients must send `Authorization: Bearer TOKEN`, TOKEN being this file's
    /// first line (at least 16 characters). The file must belong to the user running codemode
    /// and be readable by nobody else (chmod 600). Repeatable: one file per client, and each
    /// token is a client of its own, whose paused runs, requestState and tasks no other token
    /// can use. Without it the token is $CODEMODE_MCP_TOKEN; with neither, --http serves only
    /// a loopback address, to anyone who can reach it.
    #[arg(long = "auth-token-file", value_name = "FILE")]
    pub auth_token_files: Vec<PathBuf>,
    /// With --http: a browser origin (`scheme://host[:port]`, `:*` for any port) whose requests
    /// are served (repeatable). Requests with any other `Origin` header get 403; loopback
    /// origins (http or https on localhost, 127.0.0.1 or ::1, any port) are always allowed.
    #[arg(long = "allowed-origin", value_name = "ORIGIN")]
    pub allowed_origins: Vec<String>,
    /// With --http: most MCP sessions at once; past it, a new session gets 503 with
    /// Retry-After until one ends or expires.
    #[arg(long, value_name = "N", default_value_t = sessions::DEFAULT_MAX_SESSIONS, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub max_sessions: u64,
    /// With --http: a session with no request for this long (and none running) is closed,
    /// with its jobs and terminals.
    #[arg(long, value_name = "MS", default_value_t = sessions::DEFAULT_SESSION_IDLE_MS, value_parser = clap::value_parser!(u64).range(1..=86_400_000))]
    pub session_idle_ms: u64,
    /// With --http: serve /healthz, /readyz and /metrics without the bearer token, so that a
    /// probe or a scraper needs no secret (the Origin rule still holds; /mcp still needs it).
    #[arg(long)]
    pub probes_without_token: bool,
    /// With --http: most connections open at once; past it, the connection that has waited
    /// longest without a request in progress is closed to make way for a new one (when every
    /// connection is answering a request, new ones wait).
    #[arg(long, value_name = "N", default_value_t = 512, value_parser = clap::value_parser!(u64).range(1..=65_536))]
    pub max_connections: u64,
    /// With --http: a connection must finish sending a request's headers within this long
    /// (an idle kept-alive connection too), or it is closed.
    #[arg(long, value_name = "MS", default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..=3_600_000))]
    pub header_timeout_ms: u64,
    /// With --http: a connection on which nothing is read or written for this long is closed
    /// (open streams send a keep-alive often enough that a live one never is).
    #[arg(long, value_name = "MS", default_value_t = 120_000, value_parser = clap::value_parser!(u64).range(1..=86_400_000))]
    pub idle_timeout_ms: u64,
    /// With --exec: most background jobs running at once across all sessions (default 64);
    /// past it a new one is refused.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=100_000))]
    pub max_jobs: Option<u64>,
    /// With --exec: most terminals open at once across all sessions (default 32); past it a
    /// new one is refused.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=100_000))]
    pub max_terminals: Option<u64>,
    /// With --exec: most commands (foreground, background and terminal shells) running at once
    /// across all sessions (default 128); past it a call is refused.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=100_000))]
    pub max_processes: Option<u64>,
    /// What the client sees.
    #[arg(long, value_enum, default_value_t = ServeMode::Code)]
    pub mode: ServeMode,
    /// Estimated tokens of SDK `run_code`'s description may carry; past it the description
    /// lists the tools by name and `search_tools` returns their declarations.
    #[arg(long, default_value_t = codemode_runtime::run_code::prompt::DEFAULT_SDK_BUDGET)]
    pub sdk_budget: usize,
    /// Also offer the built-in tools (echo, sleep, fail, read_file, list_dir).
    #[arg(long)]
    pub builtins: bool,
    /// With --http: serve without sessions (MCP 2026-07-28, and older clients request by
    /// request), so that any request may reach any replica behind a load balancer. Approvals
    /// pause (as with --pause-on-ask) and paused runs resume on whichever replica receives the
    /// answer, through a state store the replicas share (--state; an s3:// store or a shared
    /// directory, with one $CODEMODE_STATE_KEY). --exec is refused: its jobs and terminals
    /// live in one process.
    #[arg(long, requires = "http")]
    pub stateless: bool,
    /// A `run_code` call of a client that declared the MCP tasks extension, still running
    /// after this many milliseconds, is answered with a task; its status and result are kept
    /// in the state store (--state), so that tasks/get, tasks/update and tasks/cancel work on
    /// any replica.
    #[arg(long, value_name = "MS", value_parser = clap::value_parser!(u64).range(0..=3_600_000))]
    pub task_after_ms: Option<u64>,
    /// With --task-after-ms: how often the process running a task renews its lease in the
    /// state store. A task whose lease goes three of these without a renewal (its process
    /// killed, or cut off from the store) is reported failed by every replica. The replicas'
    /// clocks should agree to within this.
    #[arg(long, value_name = "MS", default_value_t = codemode_mcp::server::DEFAULT_TASK_LEASE.as_secs() * 1000, value_parser = clap::value_parser!(u64).range(10..=600_000))]
    pub task_lease_ms: u64,
    /// The most MiB of paused-run records one client may hold in the state store (a client:
    /// a bearer token, else a session, else every client without either, as one). A pause
    /// past it is not written: the calls the run would have paused at fail with the reason,
    /// and the run goes on.
    #[arg(long, value_name = "MB", default_value_t = codemode_host::durable::DEFAULT_CLIENT_QUOTA_BYTES >> 20, value_parser = clap::value_parser!(u64).range(1..=16_777_216))]
    pub state_quota_per_client_mb: u64,
    #[command(flatten)]
    pub pause: PauseArgs,
    #[command(flatten)]
    pub budget: BudgetArgs,
    #[command(flatten)]
    pub tools: ToolArgs,
}

#[derive(Args)]
pub struct SdkArgs {
    /// Language of the SDK text.
    #[arg(long, value_enum, default_value_t = Language::TypeScript)]
    pub lang: Language,
    /// Also print on stderr how many tools the SDK declares and its estimated tokens (four
    /// characters each), and those of `run_code`'s description as `codemode mcp` would serve it
    /// (the whole SDK, or past --sdk-budget the tools' names with `search_tools`).
    #[arg(long)]
    pub stats: bool,
    /// With --stats: the budget `codemode mcp --sdk-budget` would be given.
    #[arg(long, default_value_t = codemode_runtime::run_code::prompt::DEFAULT_SDK_BUDGET, requires = "stats")]
    pub sdk_budget: usize,
    #[command(flatten)]
    pub tools: ToolArgs,
}

#[derive(Args)]
pub struct RunArgs {
    /// Program file; `-` or nothing reads standard input.
    pub file: Option<PathBuf>,
    /// Say on stderr as each call the program makes starts and settles.
    #[arg(long)]
    pub verbose: bool,
    /// Print exactly one JSON object: {"logs":[…],"result":…,"calls":[…]} or
    /// {"logs":[…],"error":{…},"calls":[…]}.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub pause: PauseArgs,
    #[command(flatten)]
    pub budget: BudgetArgs,
    #[command(flatten)]
    pub tools: ToolArgs,
}

/// Which calls pause a run and where paused runs are kept; shared by `run`, `resume` and
/// `mcp`.
#[derive(Args)]
pub struct PauseArgs {
    /// Calls of this tool pause the run instead of running (repeatable): once the program
    /// waits on nothing else, the run is written to the state store. `codemode run` then
    /// exits with 3, printing the run id and the pending calls, and `codemode resume`
    /// continues it; `codemode mcp` asks its client for the calls' replies (an input-required
    /// result, or an elicitation on the session of an older client) and resumes the run when
    /// they come back. A resumed run's own pausing tools always pause it again.
    #[arg(long = "pause-on", value_name = "NAME")]
    pub pause_on: Vec<String>,
    /// With --ask: a call that needs an approval pauses the run instead of asking at once, so
    /// that a person can answer later: with `codemode resume` (`--reply ID=true` makes the
    /// call, `--reply ID=false` or `--reject ID=MESSAGE` denies it), or for `codemode mcp`
    /// in the client's answer to an input-required result (implied by --stateless).
    #[arg(long)]
    pub pause_on_ask: bool,
    /// Where paused runs are kept: a directory (default: $CODEMODE_STATE_DIR, else
    /// $XDG_STATE_HOME/codemode, else ~/.local/state/codemode) or an S3-compatible store,
    /// s3://bucket/prefix (credentials and endpoint from the AWS_* environment). Records are
    /// authenticated with $CODEMODE_STATE_KEY, else with the state directory's key file
    /// (created 0600 on first use); an S3 store needs $CODEMODE_STATE_KEY, the same in every
    /// process that shares it. Named, it also lets `codemode mcp` pause a run for the
    /// questions an upstream server asks during a call (to a client of MCP 2026-07-28, in an
    /// input-required result) and make the call again with the answers.
    #[arg(long, value_name = "DIR|URL")]
    pub state: Option<PathBuf>,
    /// How long a paused run stays resumable (`90s`, `12h`, `7d`). Older records are refused
    /// as expired and swept from the store, together with the marks of resumed runs after
    /// twice this; processes sharing a store should agree on it.
    #[arg(long, value_name = "DURATION", default_value_t = StateTtl(codemode_host::durable::DEFAULT_STATE_TTL))]
    pub state_ttl: StateTtl,
    /// The most MiB the paused-run records of the state store may take in all. A pause past
    /// it is not written: the calls the run would have paused at fail with the reason, and
    /// the run goes on. Processes sharing a store should agree on it.
    #[arg(long, value_name = "MB", default_value_t = codemode_host::durable::DEFAULT_STATE_QUOTA_BYTES >> 20, value_parser = clap::value_parser!(u64).range(1..=16_777_216))]
    pub state_quota_mb: u64,
}

impl PauseArgs {
    /// The state directory `--state` names, unless it names an object store.
    pub fn local_state(&self) -> Option<PathBuf> {
        self.state
            .clone()
            .filter(|state| !state.to_string_lossy().starts_with("s3://"))
    }
}

/// A `--state-ttl`: a duration of at least a second and at most ten years.
#[derive(Clone, Copy, Debug)]
pub struct StateTtl(pub std::time::Duration);

impl std::str::FromStr for StateTtl {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let ttl = humantime::parse_duration(text)
            .map_err(|e| format!("{e} (write it as 90s, 12h or 7d)"))?;
        let longest = std::time::Duration::from_secs(10 * 365 * 24 * 60 * 60);
        if ttl < std::time::Duration::from_secs(1) || ttl > longest {
            return Err("a time to live is at least 1s and at most 10 years".into());
        }
        Ok(Self(ttl))
    }
}

impl std::fmt::Display for StateTtl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        humantime::format_duration(self.0).fmt(f)
    }
}

#[derive(Args)]
pub struct ResumeArgs {
    /// The run id a pause printed.
    pub run_id: String,
    /// Resolve pending call CALL_ID with this JSON value (repeatable).
    #[arg(long = "reply", value_name = "CALL_ID=JSON")]
    pub reply: Vec<String>,
    /// Reject pending call CALL_ID with this message; the program sees a ToolCallError
    /// (repeatable).
    #[arg(long = "reject", value_name = "CALL_ID=MESSAGE")]
    pub reject: Vec<String>,
    /// Print exactly one JSON object, as `run --json` does.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub pause: PauseArgs,
    /// Budgets are the run's own (kept with it); these flags set only scheduling and events.
    #[command(flatten)]
    pub budget: BudgetArgs,
    #[command(flatten)]
    pub tools: ToolArgs,
}

#[cfg(feature = "bench")]
#[derive(Args)]
pub struct BenchArgs {
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Also compare interruption schemes (none, fuel, epoch, both) on the compute and data
    /// workloads; compiles the guest once per scheme unless the disk cache has it.
    #[arg(long)]
    pub interruption: bool,
    /// Measure only the data workload (and, with --interruption, the data workload under
    /// each scheme): a quick loop for work on data-heavy programs.
    #[arg(long)]
    pub data_only: bool,
    /// Iterations of the fresh-run workload.
    #[arg(long, default_value_t = 200)]
    pub runs: usize,
    /// The guest to measure: typescript (Boa) or python (Monty), with the same workloads in
    /// each language where they have a twin.
    #[arg(long, value_enum, default_value_t = Language::TypeScript)]
    pub lang: Language,
}

/// Resolves when the process is asked to stop (Ctrl-C or SIGTERM), so that runs end as aborted
/// and upstream servers are shut down rather than orphaned.
pub async fn stop_requested() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        if let Ok(mut terminate) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = terminate.recv() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}

/// Says, as a warning, when the sandbox must first be prepared (seconds, once per machine and
/// version), so that a slow first run is explained.
pub fn announce_preparation() {
    codemode_host::on_guest_preparation(|cache| {
        tracing::warn!(
            "preparing the sandbox for first use (about ten seconds; cached under {}; `codemode prepare` does this ahead of time)",
            cache.map_or_else(
                || "nowhere: no cache directory".to_owned(),
                |p| p.display().to_string()
            )
        );
    });
}

/// The sandbox runtime, prepared now.
pub fn prepare_runtime(
    budgets: codemode_host::Budgets,
    language: Language,
) -> Result<codemode_host::WasmCodeRuntime, codemode_host::SetupError> {
    announce_preparation();
    codemode_host::WasmCodeRuntime::for_language(language, budgets)
}

pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) => {
            let code = if error.use_stderr() {
                EXIT_USAGE
            } else {
                EXIT_OK
            };
            let _ = error.print();
            return ExitCode::from(code);
        }
    };
    // Only a server that serves /metrics measures its runs.
    let metrics = match &cli.command {
        Command::Mcp(args) if args.http.is_some() => Some(metrics::Metrics::new()),
        _ => None,
    };
    // Flushes the last spans when dropped, after the command's runtime is gone.
    let _telemetry = telemetry::install(cli.log_format, metrics.as_ref());
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(error) => {
            tracing::error!("cannot start the async runtime: {error}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let code = match cli.command {
        // On a runtime worker rather than the thread blocked in `block_on`, so that waking the
        // run (a tool finishing, a timer) is not a cross-thread unpark.
        Command::Run(mut args) => runtime.block_on(async {
            args.tools.own_dirs.extend(args.pause.local_state());
            args.tools.person = true;
            args.tools.state = args.pause.state.clone();
            tokio::spawn(run::run(args)).await.unwrap_or_else(|error| {
                tracing::error!("the run failed inside the host: {error}");
                EXIT_PROGRAM_FAILED
            })
        }),
        Command::Resume(mut args) => runtime.block_on(async {
            args.tools.own_dirs.extend(args.pause.local_state());
            args.tools.person = true;
            args.tools.state = args.pause.state.clone();
            tokio::spawn(resume::resume(args))
                .await
                .unwrap_or_else(|error| {
                    tracing::error!("the run failed inside the host: {error}");
                    EXIT_PROGRAM_FAILED
                })
        }),
        Command::Sdk(mut args) => {
            args.tools.person = true;
            runtime.block_on(sdk::sdk(&args))
        }
        Command::Auth(args) => runtime.block_on(auth::auth(args)),
        Command::Mcp(mut args) => runtime.block_on(async {
            args.tools.own_dirs.extend(args.pause.local_state());
            args.tools.state = args.pause.state.clone();
            args.tools
                .own_files
                .extend(args.auth_token_files.iter().cloned());
            tokio::spawn(mcp::serve(args, metrics))
                .await
                .unwrap_or_else(|error| {
                    tracing::error!("the server failed inside the host: {error}");
                    EXIT_PROGRAM_FAILED
                })
        }),
        Command::Prepare => runtime.block_on(prepare::prepare()),
        #[cfg(feature = "bench")]
        Command::Bench(args) => runtime.block_on(bench::bench(args)),
    };
    ExitCode::from(code)
}
