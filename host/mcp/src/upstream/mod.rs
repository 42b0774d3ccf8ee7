//! Upstream MCP servers: programs codemode starts over stdio (in their own process groups,
//! killed with codemode) or servers at URLs over streamable HTTP. Each of their tools becomes
//! a registry tool `mcp__<server>__<tool>` whose calls go through the whole pipeline before
//! they reach the server.
//!
//! What a program receives from a call: for a tool that declares an `outputSchema`, its
//! `structuredContent` (or, failing that, its text content parsed as JSON), validated against
//! that schema; for any other tool, its text content, a string. Images in a result are handed to
//! the loop as a deferred context (so `run_code` attaches them after the run); an `isError`
//! result is a tool failure whose message is the result's text.
//!
//! A server that exits, or that writes anything but JSON-RPC on stdout, is cut off: its
//! in-flight calls fail and later calls fail at once, each with an error naming the server,
//! while a supervisor starts it again with backoff and lists its tools again (also when the
//! server says they changed); a changed list is published for the registry and the clients.
//! A call the program abandons (its signal fires) sends the server the MCP cancellation
//! notification.

mod call;
mod connection;
mod launch;
pub mod oauth;
pub mod questions;
mod remote;
mod spec;
mod stdio;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use codemode_runtime::json;
use codemode_runtime::tools::{ContentBlock, Schema, ToolDefinition, ToolOutput};
use rmcp::model::Tool;
use serde_json::Value;
use tokio::sync::{watch, Notify};

use call::Call;
pub(crate) use connection::PROGRESS_QUEUE;
use connection::{lock, Client, Connection, ProgressRoutes};
pub use questions::{Asker, Questions};
pub use spec::{Transport, UpstreamError, UpstreamSpec};

/// How long an upstream may take to start and list its tools.
pub const STARTUP_TIMEOUT: Duration = Duration::from_secs(60);
/// The first wait before a server that went down is started again; each failure doubles it.
const FIRST_BACKOFF: Duration = Duration::from_millis(500);
/// The longest wait between two attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// A connection that lived this long was healthy: the next failure starts the backoff over.
const STABLE: Duration = Duration::from_secs(60);

/// A running upstream server and its tools.
pub struct Upstream {
    link: Arc<Link>,
    supervisor: tokio::task::JoinHandle<()>,
}

impl Drop for Upstream {
    fn drop(&mut self) {
        self.supervisor.abort();
        self.link.close();
    }
}

/// What a server's tool calls go through: the current connection, replaced when the server
/// is started again.
pub(crate) struct Link {
    spec: UpstreamSpec,
    current: Mutex<Arc<Connection>>,
    client: Client,
    /// The latest list of tools.
    tools: watch::Sender<Arc<Vec<Tool>>>,
    /// The restart under way, for messages: its attempt and when it happens.
    restarting: Mutex<Option<(u32, Duration)>>,
    closed: AtomicBool,
    /// Held while the server is authorized to again: one person's authorization at a time,
    /// for every call the server refused.
    authorizing: tokio::sync::Mutex<()>,
}

impl Link {
    fn server(&self) -> &str {
        &self.spec.name
    }

    fn connection(&self) -> Arc<Connection> {
        lock(&self.current).clone()
    }

    fn progress(&self) -> &Arc<ProgressRoutes> {
        &self.client.progress
    }

    /// The `network.transport` of the server's spans.
    fn network_transport(&self) -> &'static str {
        match self.spec.transport {
            Transport::Command { .. } => "pipe",
            Transport::Url { .. } => "tcp",
        }
    }

    /// Why the server is down, and what is being done about it.
    fn explain(&self, why: String) -> String {
        if self.is_closed() {
            return why;
        }
        match *lock(&self.restarting) {
            Some((attempt, delay)) => format!(
                "{why}; codemode starts it again (attempt {attempt}, after {})",
                humantime::format_duration(delay)
            ),
            // The supervisor has not taken it up yet.
            None => format!("{why}; codemode starts it again"),
        }
    }

    fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        self.connection().stop();
    }

    /// After the server refused `stale`'s authorization with `challenge`: authorizes again (a
    /// person, with the scopes granted before and those the challenge names; the grants
    /// without a person, at the new connection) and connects again. A call that finds this
    /// done by another since its own attempt only tries again.
    async fn reauthorize(&self, stale: &Arc<Connection>, challenge: &str) -> Result<(), String> {
        let _one = self.authorizing.lock().await;
        if !Arc::ptr_eq(&self.connection(), stale) {
            return Ok(());
        }
        let name = self.server();
        let Transport::Url { url, oauth, .. } = &self.spec.transport else {
            return Err(format!(
                "mcp server \"{name}\" refused the call's authorization"
            ));
        };
        let settings = oauth.as_deref().cloned().unwrap_or_default();
        let authorization = &self.client.authorization;
        if settings.grant == oauth::Grant::AuthorizationCode {
            let scope = oauth::challenged_scope(challenge);
            let (Some(person), Some(store)) =
                (authorization.person(), authorization.store(name, url))
            else {
                let command = authorization.login_command(name);
                return Err(match scope {
                    Some(scope) => format!(
                        "mcp server \"{name}\" refused the call: it needs the scope \"{scope}\", which codemode's authorization does not have: run `{command} --scope \"{scope}\"`, then try again"
                    ),
                    None => format!(
                        "mcp server \"{name}\" refused the call's authorization: run `{command}`, then try again"
                    ),
                });
            };
            let login = oauth::Login {
                name,
                url,
                settings: &settings,
                scopes: store.granted_scopes().await,
                store,
                challenge: Some(challenge),
            };
            authorization.ask(person, login).await?;
        }
        let (connection, tools) =
            Connection::open(&self.spec, self.client.clone(), STARTUP_TIMEOUT)
                .await
                .map_err(|e| e.to_string())?;
        *lock(&self.current) = Arc::new(connection);
        stale.stop();
        publish(self, tools);
        Ok(())
    }

    fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }
}

impl Upstream {
    /// Starts `spec` (or connects to it) and lists its tools, within `timeout`; a supervisor
    /// then keeps it up.
    pub async fn start(
        spec: &UpstreamSpec,
        timeout: Duration,
        questions: &Questions,
        authorization: &oauth::Authorization,
    ) -> Result<Self, UpstreamError> {
        let client = Client {
            progress: Arc::default(),
            relist: Arc::new(Notify::new()),
            server: spec.name.clone(),
            questions: questions.clone(),
            authorization: authorization.clone(),
        };
        let (connection, tools) = Connection::open(spec, client.clone(), timeout).await?;
        let (tools, _) = watch::channel(Arc::new(tools));
        let link = Arc::new(Link {
            spec: spec.clone(),
            current: Mutex::new(Arc::new(connection)),
            client,
            tools,
            restarting: Mutex::new(None),
            closed: AtomicBool::new(false),
            authorizing: tokio::sync::Mutex::new(()),
        });
        let supervisor = tokio::spawn(supervise(link.clone()));
        Ok(Self { link, supervisor })
    }

    /// The server's name.
    pub fn name(&self) -> &str {
        self.link.server()
    }

    /// Whether the server answers now (it has not exited, closed its output or broken the
    /// protocol since it was last started), as a check that outlives this handle: for a
    /// metrics scrape.
    pub fn liveness(&self) -> impl Fn() -> bool + Send + Sync + 'static {
        let link = self.link.clone();
        move || link.connection().health.down().is_none()
    }

    /// The server's list of tools, as it changes (after a restart, or when the server says
    /// so).
    pub fn tools(&self) -> watch::Receiver<Arc<Vec<Tool>>> {
        self.link.tools.subscribe()
    }

    /// The registry name of one of its tools.
    pub fn tool_name(&self, tool: &str) -> String {
        tool_name(self.name(), tool)
    }

    /// Makes the definitions of a list of the server's tools (see [`Upstream::tools`]): one
    /// per tool, and a note for each tool left out (a schema the validator cannot compile).
    pub fn definer(
        &self,
    ) -> impl Fn(&[Tool]) -> (Vec<ToolDefinition>, Vec<String>) + Send + 'static {
        let link = self.link.clone();
        move |tools| definitions(&link, tools)
    }
}

fn tool_name(server: &str, tool: &str) -> String {
    format!("mcp__{server}__{tool}")
}

/// The definitions of `tools`, and a note for each one left out.
fn definitions(link: &Arc<Link>, tools: &[Tool]) -> (Vec<ToolDefinition>, Vec<String>) {
    let mut definitions = Vec::new();
    let mut notes = Vec::new();
    for tool in tools {
        match definition(link, tool) {
            Ok(definition) => definitions.push(definition),
            Err(why) => notes.push(format!(
                "mcp server \"{}\": tool \"{}\" left out: {why}",
                link.server(),
                tool.name
            )),
        }
    }
    (definitions, notes)
}

fn definition(link: &Arc<Link>, tool: &Tool) -> Result<ToolDefinition, String> {
    let input = Value::Object((*tool.input_schema).clone());
    let parameters = Schema::foreign(input).map_err(|e| format!("input schema: {e}"))?;
    let structured = tool.output_schema.is_some();
    let output = match &tool.output_schema {
        Some(schema) => Schema::foreign(Value::Object((**schema).clone()))
            .map_err(|e| format!("output schema: {e}"))?,
        None => Schema::raw(serde_json::json!({"type": "string"}))
            .map_err(|e| format!("output schema: {e}"))?,
    };
    let read_only = tool
        .annotations
        .as_ref()
        .and_then(|a| a.read_only_hint)
        .unwrap_or(false);
    let description = tool
        .description
        .as_deref()
        .or(tool.title.as_deref())
        .unwrap_or_default()
        .to_owned();
    let call = Call {
        link: link.clone(),
        tool: tool.name.to_string(),
        structured,
    };
    let call = Arc::new(call);
    let mut builder = ToolDefinition::builder(tool_name(&link.spec.name, &tool.name))
        .description(description)
        .parameters(parameters)
        .output(ToolOutput::new(output, |_, value| {
            Ok(vec![ContentBlock::text(match value {
                Value::String(text) => text.clone(),
                other => json::to_string(other),
            })])
        }))
        .execute(move |args, ctx| {
            let call = call.clone();
            async move { call.run(&args, &ctx).await }
        });
    if read_only {
        // Only a server's own `readOnlyHint` makes its calls overlap; anything else may
        // have side effects and runs alone.
        builder = builder.concurrency_safe(|_| true);
    }
    Ok(builder.build())
}

/// The wait before restart attempt `attempt` (from 1).
fn backoff(attempt: u32) -> Duration {
    FIRST_BACKOFF
        .saturating_mul(1 << attempt.saturating_sub(1).min(16))
        .min(MAX_BACKOFF)
}

/// Keeps `link`'s server up: when its connection goes down, starts it again after a backoff
/// that doubles with each failure in a row; lists its tools again after a restart or when the
/// server says they changed, and publishes a list that differs.
async fn supervise(link: Arc<Link>) {
    let mut failures = 0u32;
    let mut ttl = link.connection().list_ttl;
    loop {
        let connection = link.connection();
        // A list the server gave a time to live is listed again when it runs out (a stateless
        // server sends no notification that it changed).
        let expired = async {
            match ttl {
                Some(ttl) => tokio::time::sleep(ttl).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = connection.health.until_down() => {}
            () = async {
                tokio::select! {
                    () = link.client.relist.notified() => {}
                    () = expired => {}
                }
            } => {
                match connection.service.peer().list_all_tools_with_cache_hint().await {
                    Ok(tools) => {
                        ttl = connection::list_ttl(tools.ttl_ms);
                        publish(&link, tools.items);
                    }
                    Err(error) => tracing::warn!(
                        "mcp server \"{}\": listing its tools again failed: {error}",
                        link.server()
                    ),
                }
                continue;
            }
        }
        if link.is_closed() {
            return;
        }
        if !Arc::ptr_eq(&link.connection(), &connection) {
            // Replaced (authorized again): the new one is watched.
            ttl = link.connection().list_ttl;
            continue;
        }
        if connection.since.elapsed() >= STABLE {
            failures = 0;
        }
        drop(connection);
        loop {
            failures = failures.saturating_add(1);
            let delay = backoff(failures);
            *lock(&link.restarting) = Some((failures, delay));
            tokio::time::sleep(delay).await;
            if link.is_closed() {
                return;
            }
            match Connection::open(&link.spec, link.client.clone(), STARTUP_TIMEOUT).await {
                Ok((connection, tools)) => {
                    ttl = connection.list_ttl;
                    *lock(&link.current) = Arc::new(connection);
                    *lock(&link.restarting) = None;
                    tracing::info!(
                        "mcp server \"{}\" started again (attempt {failures})",
                        link.server()
                    );
                    publish(&link, tools);
                    break;
                }
                Err(error) => tracing::warn!(
                    "{error}; trying again after {}",
                    humantime::format_duration(backoff(failures + 1))
                ),
            }
        }
    }
}

/// Makes `tools` the server's list, telling its watchers if it changed.
fn publish(link: &Link, tools: Vec<Tool>) {
    link.tools.send_if_modified(|current| {
        if **current == tools {
            return false;
        }
        tracing::info!(
            "mcp server \"{}\" now lists {} tools",
            link.server(),
            tools.len()
        );
        *current = Arc::new(tools);
        true
    });
}

/// Starts every server at once; the ones that fail are reported, the rest serve.
pub async fn start_all(
    specs: &[UpstreamSpec],
    questions: &Questions,
    authorization: &oauth::Authorization,
) -> (Vec<Upstream>, Vec<UpstreamError>) {
    let started = futures::future::join_all(
        specs
            .iter()
            .map(|spec| Upstream::start(spec, STARTUP_TIMEOUT, questions, authorization)),
    )
    .await;
    let mut upstreams = Vec::new();
    let mut failures = Vec::new();
    for outcome in started {
        match outcome {
            Ok(upstream) => upstreams.push(upstream),
            Err(failure) => failures.push(failure),
        }
    }
    (upstreams, failures)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_backoff_doubles_from_half_a_second_to_at_most_thirty() {
        let waits: Vec<u128> = (1..=9).map(|a| backoff(a).as_millis()).collect();
        assert_eq!(
            waits,
            [500, 1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000]
        );
        assert_eq!(backoff(u32::MAX), MAX_BACKOFF);
    }
}
