//! One connection to an upstream server and its health: a program codemode started (in its
//! own process group, killed with the connection), spoken to over stdio, or a server at a URL
//! over streamable HTTP.
//!
//! A program that exits, or that writes anything but JSON-RPC on stdout, is cut off: the
//! connection is down, its in-flight calls fail, and the supervisor (`mod.rs`) starts another.
//! What it writes is read within bounds (`stdio.rs`), and so is what it reports as progress:
//! each message cut to [`MAX_PROGRESS_TEXT`], at most [`PROGRESS_QUEUE`] of them waiting for a
//! call and [`EARLY`] for a route, the rest dropped.

use std::collections::{HashMap, VecDeque};
use std::process::Stdio;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use process_wrap::tokio::{ChildWrapper, CommandWrap, KillOnDrop, ProcessGroup};
use rmcp::model::{
    ClientCapabilities, ClientConfig, ElicitRequestParams, ElicitResult, ElicitationCapability,
    FormElicitationCapability, Implementation, ProgressNotificationParam, ProgressToken,
    ProtocolVersion, Tool,
};
use rmcp::service::{
    ClientLifecycleMode, ClientServiceExt, NotificationContext, RequestContext, RoleClient,
    RunningService,
};
use rmcp::ServiceExt;
use tokio::sync::{mpsc, Notify};

use super::launch;
use super::spec::{Transport, UpstreamError, UpstreamSpec};
use super::stdio::{self, STDERR_TAIL, STDERR_TAIL_BYTES};

/// Longest progress message passed on, in bytes (cut on a character, with `…`).
pub(super) const MAX_PROGRESS_TEXT: usize = 1024;
/// Most progress messages waiting to be passed on, per call: past it, new ones are dropped.
pub(crate) const PROGRESS_QUEUE: usize = 64;
/// How long a server at a URL has to answer `server/discover` before it is taken for one that
/// speaks only the `initialize` handshake (an HTTP server answers at once, with a result or an
/// error; this bounds one that never does).
pub(super) const DISCOVER_WITHIN: Duration = Duration::from_secs(5);
/// How long a server that failed to start is given to finish its stderr.
const STDERR_SETTLE: Duration = Duration::from_secs(1);

pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Every critical section is one read or write: a panic cannot leave the value half-made.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Why a connection stopped answering, once it has.
#[derive(Default)]
pub(super) struct Health {
    down: Mutex<Option<String>>,
    stderr: Mutex<VecDeque<String>>,
    went_down: Notify,
}

impl Health {
    pub(super) fn down(&self) -> Option<String> {
        lock(&self.down).clone()
    }

    pub(super) fn mark_down(&self, reason: String) {
        let mut down = lock(&self.down);
        if down.is_none() {
            tracing::warn!("an upstream mcp server is down: {reason}");
            *down = Some(reason);
            self.went_down.notify_waiters();
        }
    }

    /// Marks the connection down without a warning: codemode ended it.
    fn stopped(&self) {
        let mut down = lock(&self.down);
        if down.is_none() {
            *down = Some("codemode stopped it".to_owned());
            self.went_down.notify_waiters();
        }
    }

    /// Resolves once the connection is down.
    /// Keeps `line` (already cut to `stdio::MAX_STDERR_LINE`) as the newest of the tail.
    pub(super) fn note_stderr(&self, line: String) {
        let mut tail = lock(&self.stderr);
        tail.push_back(line);
        let mut bytes: usize = tail.iter().map(String::len).sum();
        while tail.len() > STDERR_TAIL || bytes > STDERR_TAIL_BYTES {
            bytes -= tail.pop_front().map_or(0, |line| line.len());
        }
    }

    pub(super) async fn until_down(&self) {
        loop {
            let notified = self.went_down.notified();
            if self.down().is_some() {
                return;
            }
            notified.await;
        }
    }

    fn stderr_tail(&self) -> String {
        let tail = lock(&self.stderr);
        if tail.is_empty() {
            String::new()
        } else {
            let lines: Vec<&str> = tail.iter().map(String::as_str).collect();
            format!("; its stderr ended with: {}", lines.join(" | "))
        }
    }
}

/// Where the server's progress notifications go, by the token of the request they are about.
///
/// A request's token is known only once it was sent, and the server may report progress
/// before the route is open: such notifications wait, a bounded few, for their route.
#[derive(Default)]
pub(super) struct ProgressRoutes(Mutex<Routes>);

#[derive(Default)]
struct Routes {
    open: HashMap<ProgressToken, mpsc::Sender<String>>,
    early: VecDeque<(ProgressToken, String)>,
}

/// Most notifications kept while their route is not open yet.
const EARLY: usize = 256;

impl ProgressRoutes {
    /// Sends `token`'s notifications' messages to `to` until the returned guard drops; those
    /// that find it full are dropped.
    pub(super) fn route(
        self: &Arc<Self>,
        token: ProgressToken,
        to: mpsc::Sender<String>,
    ) -> RouteGuard {
        let mut routes = lock(&self.0);
        let early = std::mem::take(&mut routes.early);
        for (early_token, text) in early {
            if early_token == token {
                let _ = to.try_send(text);
            } else {
                routes.early.push_back((early_token, text));
            }
        }
        routes.open.insert(token.clone(), to);
        RouteGuard {
            routes: self.clone(),
            token,
        }
    }

    fn forward(&self, params: &ProgressNotificationParam) {
        let text = match (&params.message, params.total) {
            (Some(message), _) => cut(message, MAX_PROGRESS_TEXT),
            (None, Some(total)) => format!("{} of {total}", params.progress),
            (None, None) => format!("{}", params.progress),
        };
        let mut routes = lock(&self.0);
        match routes.open.get(&params.progress_token) {
            Some(to) => {
                // A client slower than the server misses some of its progress, never more.
                let _ = to.try_send(text);
            }
            None => {
                if routes.early.len() == EARLY {
                    routes.early.pop_front();
                }
                routes
                    .early
                    .push_back((params.progress_token.clone(), text));
            }
        }
    }
}

/// `text` whole, or its first `max` bytes cut on a character boundary, with `…`.
fn cut(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

/// Keeps a progress route open.
pub(super) struct RouteGuard {
    routes: Arc<ProgressRoutes>,
    token: ProgressToken,
}

impl Drop for RouteGuard {
    fn drop(&mut self) {
        lock(&self.routes.0).open.remove(&self.token);
    }
}

/// codemode as an upstream server's client: it routes the server's progress and hears that its
/// tools changed.
#[derive(Clone)]
pub(super) struct Client {
    pub(super) progress: Arc<ProgressRoutes>,
    /// Told when the server says its list of tools changed.
    pub(super) relist: Arc<Notify>,
    /// The server's name, for its questions.
    pub(super) server: String,
    /// Where its questions go.
    pub(super) questions: super::Questions,
    /// How it is authorized to, when it asks.
    pub(super) authorization: super::oauth::Authorization,
}

impl rmcp::ClientHandler for Client {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.progress.forward(&params);
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.relist.notify_one();
    }

    /// A question of the server's, put to the person behind the call it came during.
    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, rmcp::ErrorData> {
        Ok(self.questions.ask(&self.server, request).await)
    }

    /// codemode by name and version, offering in `initialize` the newest protocol that still
    /// has it (2025-11-25): a server answers with the version it speaks, which codemode takes.
    /// It answers form questions (elicitation), put to the person codemode asks.
    fn get_info(&self) -> ClientConfig {
        let mut capabilities = ClientCapabilities::default();
        // Form questions only: sampling stays refused (rmcp answers it as a method not found).
        let mut elicitation = ElicitationCapability::default();
        elicitation.form = Some(FormElicitationCapability::default());
        capabilities.elicitation = Some(elicitation);
        ClientConfig::new(
            capabilities,
            Implementation::new("codemode", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
    }
}

/// What to start for a server given by a command.
struct Program<'a> {
    command: &'a str,
    args: &'a [String],
    env: &'a std::collections::BTreeMap<String, String>,
    cwd: Option<&'a std::path::Path>,
}

/// A process of the server's, killed (with its group) when the connection drops.
pub(super) type Child = Arc<Mutex<Box<dyn ChildWrapper>>>;

/// A live connection to the server.
pub(super) struct Connection {
    pub(super) service: RunningService<RoleClient, Client>,
    pub(super) health: Arc<Health>,
    child: Option<Child>,
    /// When it was made, to tell a server that keeps failing from one that failed once.
    pub(super) since: Instant,
    /// How long its list of tools holds, when the server says (`ttlMs`).
    pub(super) list_ttl: Option<Duration>,
}

impl Drop for Connection {
    fn drop(&mut self) {
        // The whole process group: a server started through `npx` or a shell has children.
        if let Some(child) = &self.child {
            let _ = lock(child).start_kill();
        }
    }
}

impl Connection {
    /// Ends the connection for good: its program is killed (with its group) and its calls
    /// fail.
    pub(super) fn stop(&self) {
        self.health.stopped();
        if let Some(child) = &self.child {
            let _ = lock(child).start_kill();
        }
    }

    /// Reaches `spec`'s server and lists its tools, within `timeout`.
    pub(super) async fn open(
        spec: &UpstreamSpec,
        client: Client,
        timeout: Duration,
    ) -> Result<(Self, Vec<Tool>), UpstreamError> {
        match &spec.transport {
            Transport::Command {
                command,
                args,
                env,
                cwd,
            } => {
                let program = Program {
                    command,
                    args,
                    env,
                    cwd: cwd.as_deref(),
                };
                Self::start(&spec.name, program, client, timeout).await
            }
            Transport::Url {
                url,
                headers,
                oauth,
            } => {
                let remote = super::remote::Remote {
                    name: &spec.name,
                    url,
                    headers,
                    oauth: oauth.as_deref(),
                };
                super::remote::connect(remote, client, timeout).await
            }
        }
    }

    /// A connection to a server at a URL, once it has listed its tools: spoken to as MCP
    /// 2026-07-28 (stateless: version, capabilities and client info in each request's `_meta`)
    /// when it answers `server/discover` within [`DISCOVER_WITHIN`], else with the
    /// `initialize` handshake over a fresh transport from `transport`.
    pub(super) async fn over<T, E, A>(
        name: &str,
        transport: impl Fn() -> T,
        client: Client,
        timeout: Duration,
    ) -> Result<(Self, Vec<Tool>), UpstreamError>
    where
        T: rmcp::transport::IntoTransport<RoleClient, E, A>,
        E: std::error::Error + Send + Sync + 'static,
    {
        let health = Arc::new(Health::default());
        // A server that asks for authorization says how in its challenge.
        let refusal = |reason: String, challenge: Option<&str>| match challenge {
            Some(challenge) => UpstreamError::Unauthorized {
                name: name.to_owned(),
                problem: reason,
                command: String::new(),
                challenge: challenge.to_owned(),
            },
            None => handshake(name, reason, String::new()),
        };
        let started = tokio::time::timeout(timeout, async {
            let discover = ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            };
            let discovered = tokio::time::timeout(
                DISCOVER_WITHIN,
                client.clone().serve_with_lifecycle(transport(), discover),
            )
            .await;
            let service = match discovered {
                Ok(Ok(service)) => service,
                Ok(Err(error)) if error.auth_challenge().is_some() => {
                    return Err(refusal(error.to_string(), error.auth_challenge()))
                }
                // An older server (an error, an HTTP status, no answer): the handshake.
                _ => client
                    .clone()
                    .serve(transport())
                    .await
                    .map_err(|e| refusal(e.to_string(), e.auth_challenge()))?,
            };
            let tools = service
                .list_all_tools_with_cache_hint()
                .await
                .map_err(|e| refusal(e.to_string(), e.auth_challenge()))?;
            Ok::<_, UpstreamError>((service, tools))
        })
        .await;
        let (service, tools) = match started {
            Ok(Ok(started)) => started,
            Ok(Err(refused)) => return Err(refused),
            Err(_) => {
                return Err(handshake(
                    name,
                    format!("no answer within {timeout:?}"),
                    String::new(),
                ))
            }
        };
        tokio::spawn(watch_close(service.peer().clone(), health.clone()));
        Ok((
            Self {
                service,
                health,
                child: None,
                since: Instant::now(),
                list_ttl: list_ttl(tools.ttl_ms),
            },
            tools.items,
        ))
    }

    async fn start(
        name: &str,
        program: Program<'_>,
        client: Client,
        timeout: Duration,
    ) -> Result<(Self, Vec<Tool>), UpstreamError> {
        let Program {
            command,
            args,
            env,
            cwd,
        } = program;
        let spawn_error = |source: std::io::Error| UpstreamError::Spawn {
            name: name.to_owned(),
            command: command.to_owned(),
            source: Arc::new(source),
        };
        // Never the current directory (the workspace): see `launch`.
        let path = env
            .get("PATH")
            .map(std::ffi::OsString::from)
            .or_else(|| std::env::var_os("PATH"));
        let executable = launch::resolve(command, path.as_deref()).map_err(spawn_error)?;
        let dir = match cwd {
            Some(dir) => dir.to_owned(),
            None => launch::working_dir(name).map_err(spawn_error)?,
        };
        let mut wrapped = CommandWrap::with_new(&executable, |c| {
            // codemode's own secrets are not the server's (its configuration may still pass
            // them explicitly).
            c.arg0(command)
                .args(args)
                .current_dir(&dir)
                .env_remove(crate::server::TOKEN_ENV)
                .env_remove(codemode_durable::KEY_ENV)
                .envs(env)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
        });
        wrapped.wrap(ProcessGroup::leader()).wrap(KillOnDrop);
        let mut child = wrapped.spawn().map_err(spawn_error)?;
        let (Some(stdin), Some(stdout), stderr) = (
            child.stdin().take(),
            child.stdout().take(),
            child.stderr().take(),
        ) else {
            return Err(handshake(name, "no stdio pipes".to_owned(), String::new()));
        };
        let health = Arc::new(Health::default());
        let child: Child = Arc::new(Mutex::new(child));
        let stderr_read =
            stderr.map(|stderr| tokio::spawn(stdio::keep_stderr_tail(stderr, health.clone())));
        let (reader, filtered) = tokio::io::duplex(64 * 1024);
        tokio::spawn(stdio::pass_json_rpc_only(
            stdout,
            filtered,
            health.clone(),
            child.clone(),
        ));
        let started = tokio::time::timeout(timeout, async {
            let service = client
                .serve((reader, stdin))
                .await
                .map_err(|e| e.to_string())?;
            let tools = service
                .list_all_tools_with_cache_hint()
                .await
                .map_err(|e| e.to_string())?;
            Ok::<_, String>((service, tools))
        })
        .await;
        let why = match started {
            Ok(Ok((service, tools))) => {
                tokio::spawn(watch_exit(child.clone(), health.clone()));
                let connection = Self {
                    service,
                    health,
                    child: Some(child),
                    since: Instant::now(),
                    list_ttl: list_ttl(tools.ttl_ms),
                };
                return Ok((connection, tools.items));
            }
            Ok(Err(why)) => why,
            Err(_) => format!("no answer within {timeout:?}"),
        };
        let reason = health.down().unwrap_or(why);
        let _ = lock(&child).start_kill();
        // The server is gone: the rest of what it wrote on stderr is in the pipe, and its last
        // lines are what says why. A little while to read them, should a process the server
        // left behind keep the pipe open.
        if let Some(read) = stderr_read {
            let _ = tokio::time::timeout(STDERR_SETTLE, read).await;
        }
        Err(handshake(name, reason, health.stderr_tail()))
    }
}

/// The shortest time a list of tools is kept: a server's `ttlMs` of 0 (or a few) would have
/// codemode list its tools without pause.
const MIN_LIST_TTL: Duration = Duration::from_secs(1);

/// How long a list the server gave `ttl_ms` for holds before it is listed again.
pub(super) fn list_ttl(ttl_ms: Option<u64>) -> Option<Duration> {
    ttl_ms.map(|ms| Duration::from_millis(ms).max(MIN_LIST_TTL))
}

fn handshake(name: &str, reason: String, stderr_tail: String) -> UpstreamError {
    UpstreamError::Handshake {
        name: name.to_owned(),
        reason,
        stderr_tail,
    }
}

/// Notes the server's exit, so calls after it fail at once with its status.
async fn watch_exit(child: Child, health: Arc<Health>) {
    loop {
        let status = lock(&child).try_wait();
        match status {
            Ok(Some(status)) => {
                health.mark_down(format!("its process exited ({status})"));
                return;
            }
            Ok(None) => tokio::time::sleep(Duration::from_millis(100)).await,
            Err(_) => return,
        }
    }
}

/// Notes that a remote connection closed (its transport ended or failed for good).
async fn watch_close(peer: rmcp::service::Peer<RoleClient>, health: Arc<Health>) {
    while !peer.is_transport_closed() {
        if health.down().is_some() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    health.mark_down("its connection closed".to_owned());
}

#[cfg(test)]
mod tests {
    use rmcp::model::NumberOrString;

    use super::*;

    fn progress(token: &ProgressToken, message: &str) -> ProgressNotificationParam {
        ProgressNotificationParam::new(token.clone(), 1.0).with_message(message)
    }

    #[test]
    fn progress_is_cut_and_kept_within_bounds() {
        let routes = Arc::new(ProgressRoutes::default());
        let early = ProgressToken(NumberOrString::Number(1));
        let other = ProgressToken(NumberOrString::Number(2));
        // Before its route opens: at most EARLY kept, of any token, each cut.
        for _ in 0..EARLY {
            routes.forward(&progress(&other, "stale"));
        }
        for _ in 0..EARLY {
            routes.forward(&progress(&early, &"é".repeat(100_000)));
        }
        assert_eq!(lock(&routes.0).early.len(), EARLY);
        let (tx, mut rx) = mpsc::channel(PROGRESS_QUEUE);
        let _open = routes.route(early.clone(), tx);
        assert!(lock(&routes.0).early.is_empty());
        // The route takes what fits its queue; the rest is dropped, now and later.
        routes.forward(&progress(&early, "dropped"));
        let mut got = Vec::new();
        while let Ok(message) = rx.try_recv() {
            got.push(message);
        }
        let cut = format!("{}…", "é".repeat(MAX_PROGRESS_TEXT / 2));
        assert_eq!(got, vec![cut; PROGRESS_QUEUE]);
        routes.forward(&progress(&early, "after"));
        assert_eq!(rx.try_recv().ok().as_deref(), Some("after"));
    }

    #[test]
    fn the_stderr_tail_keeps_the_last_lines_within_its_bytes() {
        let health = Health::default();
        for n in 0..100 {
            health.note_stderr(format!("line {n}"));
        }
        let tail = health.stderr_tail();
        assert!(
            tail.starts_with("; its stderr ended with: line 80 | "),
            "{tail}"
        );
        assert!(tail.ends_with("line 99"), "{tail}");
        for _ in 0..100 {
            health.note_stderr("x".repeat(stdio::MAX_STDERR_LINE));
        }
        let kept: usize = lock(&health.stderr).iter().map(String::len).sum();
        assert!(kept <= STDERR_TAIL_BYTES, "{kept}");
        assert_eq!(
            lock(&health.stderr).len(),
            STDERR_TAIL_BYTES / stdio::MAX_STDERR_LINE
        );
    }
}
