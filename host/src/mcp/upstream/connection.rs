//! One connection to an upstream server and its health: a program codemode started (in its
//! own process group, killed with the connection), spoken to over stdio, or a server at a URL
//! over streamable HTTP.
//!
//! A program that exits, or that writes anything but JSON-RPC on stdout, is cut off: the
//! connection is down, its in-flight calls fail, and the supervisor (`mod.rs`) starts another.

use std::collections::{HashMap, VecDeque};
use std::process::Stdio;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use futures::StreamExt;
use process_wrap::tokio::{ChildWrapper, CommandWrap, KillOnDrop, ProcessGroup};
use rmcp::model::{ProgressNotificationParam, ProgressToken, Tool};
use rmcp::service::{NotificationContext, RoleClient, RunningService};
use rmcp::ServiceExt;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, Notify};
use tokio_util::codec::{FramedRead, LinesCodec};

use super::spec::{Transport, UpstreamError, UpstreamSpec};

/// Longest line an upstream may write (rmcp's own default).
const MAX_LINE: usize = 16 * 1024 * 1024;
/// Lines of an upstream's stderr kept for error messages.
const STDERR_TAIL: usize = 20;

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
    open: HashMap<ProgressToken, mpsc::UnboundedSender<String>>,
    early: VecDeque<(ProgressToken, String)>,
}

/// Most notifications kept while their route is not open yet.
const EARLY: usize = 256;

impl ProgressRoutes {
    /// Sends `token`'s notifications' messages to `to` until the returned guard drops.
    pub(super) fn route(
        self: &Arc<Self>,
        token: ProgressToken,
        to: mpsc::UnboundedSender<String>,
    ) -> RouteGuard {
        let mut routes = lock(&self.0);
        let early = std::mem::take(&mut routes.early);
        for (early_token, text) in early {
            if early_token == token {
                let _ = to.send(text);
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
            (Some(message), _) => message.clone(),
            (None, Some(total)) => format!("{} of {total}", params.progress),
            (None, None) => format!("{}", params.progress),
        };
        let mut routes = lock(&self.0);
        match routes.open.get(&params.progress_token) {
            Some(to) => {
                let _ = to.send(text);
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
}

/// A process of the server's, killed (with its group) when the connection drops.
type Child = Arc<Mutex<Box<dyn ChildWrapper>>>;

/// A live connection to the server.
pub(super) struct Connection {
    pub(super) service: RunningService<RoleClient, Client>,
    pub(super) health: Arc<Health>,
    child: Option<Child>,
    /// When it was made, to tell a server that keeps failing from one that failed once.
    pub(super) since: Instant,
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
            Transport::Command { command, args, env } => {
                Self::start(&spec.name, command, args, env, client, timeout).await
            }
            Transport::Url { url, headers } => {
                super::remote::connect(&spec.name, url, headers, client, timeout).await
            }
        }
    }

    /// A connection over `transport` (a URL's), once it has listed its tools.
    pub(super) async fn over<T, E, A>(
        name: &str,
        transport: T,
        client: Client,
        timeout: Duration,
    ) -> Result<(Self, Vec<Tool>), UpstreamError>
    where
        T: rmcp::transport::IntoTransport<RoleClient, E, A>,
        E: std::error::Error + Send + Sync + 'static,
    {
        let health = Arc::new(Health::default());
        let started = tokio::time::timeout(timeout, async {
            let service = client.serve(transport).await.map_err(|e| e.to_string())?;
            let tools = service.list_all_tools().await.map_err(|e| e.to_string())?;
            Ok::<_, String>((service, tools))
        })
        .await;
        let (service, tools) = match started {
            Ok(Ok(started)) => started,
            Ok(Err(reason)) => return Err(handshake(name, reason, String::new())),
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
            },
            tools,
        ))
    }

    async fn start(
        name: &str,
        command: &str,
        args: &[String],
        env: &std::collections::BTreeMap<String, String>,
        client: Client,
        timeout: Duration,
    ) -> Result<(Self, Vec<Tool>), UpstreamError> {
        let mut wrapped = CommandWrap::with_new(command, |c| {
            // codemode's own secrets are not the server's (its configuration may still pass
            // them explicitly).
            c.args(args)
                .env_remove(crate::mcp::server::TOKEN_ENV)
                .env_remove(crate::durable::KEY_ENV)
                .envs(env)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
        });
        wrapped.wrap(ProcessGroup::leader()).wrap(KillOnDrop);
        let mut child = wrapped.spawn().map_err(|source| UpstreamError::Spawn {
            name: name.to_owned(),
            command: command.to_owned(),
            source: Arc::new(source),
        })?;
        let (Some(stdin), Some(stdout), stderr) = (
            child.stdin().take(),
            child.stdout().take(),
            child.stderr().take(),
        ) else {
            return Err(handshake(name, "no stdio pipes".to_owned(), String::new()));
        };
        let health = Arc::new(Health::default());
        let child: Child = Arc::new(Mutex::new(child));
        if let Some(stderr) = stderr {
            tokio::spawn(keep_stderr_tail(stderr, health.clone()));
        }
        let (reader, filtered) = tokio::io::duplex(64 * 1024);
        tokio::spawn(pass_json_rpc_only(
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
            let tools = service.list_all_tools().await.map_err(|e| e.to_string())?;
            Ok::<_, String>((service, tools))
        })
        .await;
        let failure = |why: String| {
            let reason = health.down().unwrap_or(why);
            let _ = lock(&child).start_kill();
            handshake(name, reason, health.stderr_tail())
        };
        let (service, tools) = match started {
            Ok(Ok(started)) => started,
            Ok(Err(why)) => return Err(failure(why)),
            Err(_) => return Err(failure(format!("no answer within {timeout:?}"))),
        };
        tokio::spawn(watch_exit(child.clone(), health.clone()));
        Ok((
            Self {
                service,
                health,
                child: Some(child),
                since: Instant::now(),
            },
            tools,
        ))
    }
}

fn handshake(name: &str, reason: String, stderr_tail: String) -> UpstreamError {
    UpstreamError::Handshake {
        name: name.to_owned(),
        reason,
        stderr_tail,
    }
}

/// Forwards the server's stdout to rmcp line by line while every line is a JSON-RPC message;
/// the first line that is not cuts the server off (rmcp would skip it and leave the call that
/// waited for it hanging).
async fn pass_json_rpc_only(
    stdout: impl tokio::io::AsyncRead + Unpin,
    mut filtered: tokio::io::DuplexStream,
    health: Arc<Health>,
    child: Child,
) {
    let mut lines = FramedRead::new(stdout, LinesCodec::new_with_max_length(MAX_LINE));
    while let Some(line) = lines.next().await {
        let line = match line {
            Ok(line) => line,
            Err(e) => {
                health.mark_down(format!("it wrote an unreadable line ({e})"));
                break;
            }
        };
        if line.trim().is_empty() {
            continue;
        }
        let is_json_rpc = serde_json::from_str::<Value>(&line)
            .ok()
            .is_some_and(|v| v.get("jsonrpc").and_then(Value::as_str) == Some("2.0"));
        if !is_json_rpc {
            let shown: String = line.chars().take(80).collect();
            health.mark_down(format!("it wrote a line that is not JSON-RPC: {shown:?}"));
            break;
        }
        let mut bytes = line.into_bytes();
        bytes.push(b'\n');
        if filtered.write_all(&bytes).await.is_err() {
            return;
        }
    }
    // A server that exits closes its output first: give the exit a moment to be seen, so
    // the reason names it.
    for _ in 0..10 {
        if let Ok(Some(status)) = lock(&child).try_wait() {
            health.mark_down(format!("its process exited ({status})"));
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    health.mark_down("its standard output closed".to_owned());
    let _ = lock(&child).start_kill();
    // Dropping `filtered` ends rmcp's input: every call still waiting fails.
}

async fn keep_stderr_tail(stderr: impl tokio::io::AsyncRead + Unpin, health: Arc<Health>) {
    let mut lines = BufReader::new(stderr).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let mut tail = lock(&health.stderr);
        if tail.len() == STDERR_TAIL {
            tail.pop_front();
        }
        tail.push_back(line.chars().take(500).collect());
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
