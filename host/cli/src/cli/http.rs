//! `codemode mcp --http`: streamable HTTP at `/mcp`, admitting only whom it should and bounding
//! what clients can hold.
//!
//! In front of rmcp's service, every request passes a gate, whatever its path (the probes
//! included): an `Origin` header must name an allowed origin (403), the bearer token must match
//! one of those configured, when any is (401), the `Host` must be a loopback name or an
//! `--allowed-host` (403; the DNS-rebinding check), and a new session must fit under
//! `--max-sessions` (503). The gate then names the request's client for the MCP server (a
//! [`Principal`] in its extensions): the token it presented, else its session, else no one in
//! particular. Connections are served by hyper's HTTP/1
//! server: at most `--max-connections` at once (past it, the connection that has waited
//! longest without a request in progress is closed to make way for a new one), each closed
//! when its request headers take longer than `--header-timeout-ms` (also the most a
//! kept-alive connection may sit idle between requests) or when nothing moves on it for
//! `--idle-timeout-ms`.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::body::{Body, HttpBody};
use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use codemode_host::durable::Principal;
use codemode_mcp::server::Served;
use codemode_mcp::sessions::{BoundedSessions, SessionLimits};
use futures::StreamExt;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use super::probes::{self, Observed};
use super::McpArgs;

use codemode_mcp::server::TOKEN_ENV;
/// Shortest token accepted: anything shorter could be guessed over the network.
const MIN_TOKEN_LEN: usize = 16;
/// How long a stopping server waits for its connections to finish.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);
/// Connections the kernel queues before they are accepted.
const LISTEN_BACKLOG: u32 = 1024;
/// The longest interval between keep-alive messages on an open stream.
const MAX_STREAM_KEEP_ALIVE: Duration = Duration::from_secs(15);

/// Everything `--http` needs, checked before anything starts: problems here are usage errors.
pub struct HttpSetup {
    listener: tokio::net::TcpListener,
    gate: Gate,
    allowed_hosts: Vec<String>,
    limits: SessionLimits,
    max_connections: u32,
    header_timeout: Duration,
    idle_timeout: Duration,
    /// `--stateless`: no sessions; every request stands alone.
    stateless: bool,
}

/// What a request must satisfy before rmcp sees it.
struct Gate {
    /// Every client's token; none means no authentication (loopback only).
    tokens: Vec<Token>,
    origins: Vec<OriginRule>,
    /// The names a request's `Host` may give: loopback plus `--allowed-host`.
    hosts: Vec<HostRule>,
    /// `--probes-without-token`: the probes' paths need no token.
    open_probes: bool,
    /// `--stateless`: a session id a request carries names no session of this server.
    stateless: bool,
}

/// The bearer token, kept as its digest: comparing digests in constant time reveals neither
/// the token's bytes nor its length.
struct Token([u8; 32]);

impl Token {
    fn new(token: &str) -> Self {
        Self(Sha256::digest(token.as_bytes()).into())
    }

    #[cfg(test)]
    fn matches(&self, presented: &[u8]) -> bool {
        let digest: [u8; 32] = Sha256::digest(presented).into();
        self.matches_digest(&digest)
    }

    fn matches_digest(&self, digest: &[u8; 32]) -> bool {
        digest[..].ct_eq(&self.0[..]).into()
    }
}

impl HttpSetup {
    /// Checks the `--http` flags, reads the token and binds `addr`.
    pub async fn new(args: &McpArgs, addr: &str) -> Result<Self, String> {
        let tokens = read_tokens(&args.auth_token_files)?;
        let mut origins = OriginRule::loopback();
        for origin in &args.allowed_origins {
            origins.push(OriginRule::parse(origin).ok_or_else(|| {
                format!(
                    "codemode: --allowed-origin {origin:?} is not an origin: write scheme://host, scheme://host:port or scheme://host:* (any port), e.g. https://app.example.com"
                )
            })?);
        }
        let hosts = HostRule::allowed(&args.allowed_hosts)?;
        let resolved: Vec<SocketAddr> = tokio::net::lookup_host(addr)
            .await
            .map_err(|e| {
                format!("codemode: --http {addr}: not an address to listen on ({e}); write HOST:PORT, e.g. 127.0.0.1:8080")
            })?
            .collect();
        if tokens.is_empty() {
            if let Some(open) = resolved
                .iter()
                .find(|a| !a.ip().to_canonical().is_loopback())
            {
                return Err(format!(
                    "codemode: refusing to serve --http {addr} without authentication: {} is reachable from other machines, and whoever reaches the server can run programs and call its tools as this user. Give clients a bearer token with --auth-token-file FILE (a file only you can read) or ${TOKEN_ENV}, or listen on a loopback address such as 127.0.0.1:{}",
                    open.ip(),
                    open.port()
                ));
            }
        }
        let listener =
            listen(&resolved).map_err(|e| format!("codemode: cannot listen on {addr}: {e}"))?;
        let max_sessions = usize::try_from(args.max_sessions).unwrap_or(usize::MAX);
        Ok(Self {
            listener,
            gate: Gate {
                tokens,
                origins,
                hosts,
                open_probes: args.probes_without_token,
                stateless: args.stateless,
            },
            allowed_hosts: args.allowed_hosts.clone(),
            limits: SessionLimits {
                max_sessions,
                idle: Duration::from_millis(args.session_idle_ms),
            },
            max_connections: u32::try_from(args.max_connections).unwrap_or(u32::MAX),
            header_timeout: Duration::from_millis(args.header_timeout_ms),
            idle_timeout: Duration::from_millis(args.idle_timeout_ms),
            stateless: args.stateless,
        })
    }
}

/// A listener on the first of `addrs` that can be bound, with a listen queue long enough to
/// take a burst of connections while the accept loop catches up.
fn listen(addrs: &[SocketAddr]) -> std::io::Result<tokio::net::TcpListener> {
    let mut last = None;
    for addr in addrs {
        let socket = match addr {
            SocketAddr::V4(_) => tokio::net::TcpSocket::new_v4(),
            SocketAddr::V6(_) => tokio::net::TcpSocket::new_v6(),
        };
        let bound = socket.and_then(|socket| {
            socket.set_reuseaddr(true)?;
            socket.bind(*addr)?;
            socket.listen(LISTEN_BACKLOG)
        });
        match bound {
            Ok(listener) => return Ok(listener),
            Err(error) => last = Some(error),
        }
    }
    Err(last.unwrap_or_else(|| {
        std::io::Error::new(std::io::ErrorKind::InvalidInput, "no address to listen on")
    }))
}

/// The token of each of `files` (its first line), else the environment's; none when neither.
fn read_tokens(files: &[PathBuf]) -> Result<Vec<Token>, String> {
    if !files.is_empty() {
        return files
            .iter()
            .map(|path| {
                let source = format!("--auth-token-file {}", path.display());
                checked_token(&read_token_file(path)?, &source)
            })
            .collect();
    }
    match std::env::var(TOKEN_ENV) {
        Ok(token) => Ok(vec![checked_token(&token, &format!("${TOKEN_ENV}"))?]),
        Err(std::env::VarError::NotPresent) => Ok(Vec::new()),
        Err(std::env::VarError::NotUnicode(_)) => Err(format!(
            "codemode: ${TOKEN_ENV} is not UTF-8; use printable ASCII, e.g. the output of `openssl rand -hex 32`"
        )),
    }
}

/// `token` (from `source`, for messages) when it is long enough and can be sent in a header.
fn checked_token(token: &str, source: &str) -> Result<Token, String> {
    let token = token.trim();
    if token.len() < MIN_TOKEN_LEN {
        return Err(format!(
            "codemode: the token in {source} is {} characters long; use at least {MIN_TOKEN_LEN}, e.g. the output of `openssl rand -hex 32`",
            token.len()
        ));
    }
    if !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(format!(
            "codemode: the token in {source} has characters a client cannot send in a header; use printable ASCII without spaces, e.g. the output of `openssl rand -hex 32`"
        ));
    }
    Ok(Token::new(token))
}

/// The first line of a token file that belongs to this user and that nobody else can read.
fn read_token_file(path: &Path) -> Result<String, String> {
    use std::io::Read;
    let shown = path.display();
    let file = std::fs::File::open(path)
        .map_err(|e| format!("codemode: cannot read --auth-token-file {shown}: {e}"))?;
    // The checks look at the file that was opened, not at whatever the path names later.
    let meta = file
        .metadata()
        .map_err(|e| format!("codemode: cannot read --auth-token-file {shown}: {e}"))?;
    if !meta.is_file() {
        return Err(format!(
            "codemode: --auth-token-file {shown} is not a regular file"
        ));
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        let me = codemode_host::durable::euid();
        if meta.uid() != me {
            return Err(format!(
                "codemode: --auth-token-file {shown} belongs to uid {}, not to the user running codemode (uid {me}): whoever owns it can change the token. Use a file of your own (chmod 600)",
                meta.uid()
            ));
        }
        let mode = meta.mode() & 0o777;
        if mode & 0o077 != 0 {
            return Err(format!(
                "codemode: --auth-token-file {shown} can be read or written by other users (mode {mode:04o}); run `chmod 600 {shown}`"
            ));
        }
    }
    let mut text = String::new();
    file.take(64 * 1024)
        .read_to_string(&mut text)
        .map_err(|e| format!("codemode: cannot read --auth-token-file {shown}: {e}"))?;
    Ok(text.lines().next().unwrap_or_default().to_owned())
}

/// An allowed browser origin.
#[derive(Debug, Clone, PartialEq, Eq)]
struct OriginRule {
    scheme: String,
    host: String,
    /// `None` for any port.
    port: Option<u16>,
}

/// A parsed `Origin` header or rule: scheme, lower-case host without brackets, port if given.
fn parse_origin(value: &str) -> Option<(String, String, Option<u16>)> {
    let uri: axum::http::Uri = value.parse().ok()?;
    let scheme = uri.scheme_str()?.to_ascii_lowercase();
    let authority = uri.authority()?;
    if authority.as_str().contains('@') || !matches!(uri.path(), "" | "/") || uri.query().is_some()
    {
        return None;
    }
    let host = authority
        .host()
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_ascii_lowercase();
    Some((scheme, host, authority.port_u16()))
}

fn default_port(scheme: &str) -> Option<u16> {
    match scheme {
        "http" => Some(80),
        "https" => Some(443),
        _ => None,
    }
}

impl OriginRule {
    /// http and https on the loopback names, any port.
    fn loopback() -> Vec<Self> {
        let mut rules = Vec::new();
        for scheme in ["http", "https"] {
            for host in ["localhost", "127.0.0.1", "::1"] {
                rules.push(Self {
                    scheme: scheme.into(),
                    host: host.into(),
                    port: None,
                });
            }
        }
        rules
    }

    /// `scheme://host`, `scheme://host:port` or `scheme://host:*`; a rule without a port means
    /// the scheme's default port.
    fn parse(value: &str) -> Option<Self> {
        let value = value.trim().trim_end_matches('/');
        if let Some(base) = value.strip_suffix(":*") {
            let (scheme, host, None) = parse_origin(base)? else {
                return None;
            };
            return Some(Self {
                scheme,
                host,
                port: None,
            });
        }
        let (scheme, host, port) = parse_origin(value)?;
        let port = port.or_else(|| default_port(&scheme))?;
        Some(Self {
            scheme,
            host,
            port: Some(port),
        })
    }

    fn allows(&self, scheme: &str, host: &str, port: Option<u16>) -> bool {
        self.scheme == scheme
            && self.host == host
            && self
                .port
                .is_none_or(|allowed| port.or_else(|| default_port(scheme)) == Some(allowed))
    }
}

/// A name a request's `Host` header may give: a host, and the only port allowed with it if the
/// rule names one (the same reading as rmcp's own check behind `/mcp`).
#[derive(Debug, Clone, PartialEq, Eq)]
struct HostRule {
    host: String,
    port: Option<u16>,
}

/// Lower-case host without brackets, and the port if given, of a `Host` value or rule.
fn parse_authority(value: &str) -> Option<(String, Option<u16>)> {
    let authority: axum::http::uri::Authority = value.trim().parse().ok()?;
    if authority.as_str().contains('@') {
        return None;
    }
    let host = authority
        .host()
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_ascii_lowercase();
    Some((host, authority.port_u16()))
}

impl HostRule {
    /// The loopback names, on any port, and each `--allowed-host`.
    fn allowed(extra: &[String]) -> Result<Vec<Self>, String> {
        let mut rules: Vec<Self> = ["localhost", "127.0.0.1", "::1"]
            .into_iter()
            .map(|host| Self {
                host: host.into(),
                port: None,
            })
            .collect();
        for value in extra {
            let (host, port) = parse_authority(value).ok_or_else(|| {
                format!("codemode: --allowed-host {value:?} is not a host name: write HOST or HOST:PORT, e.g. mcp.example.com")
            })?;
            rules.push(Self { host, port });
        }
        Ok(rules)
    }
}

impl Gate {
    /// The 403 (or 400, without a readable `Host`) for a request whose `Host` names a server
    /// this one is not: a page on another site whose name was made to resolve to this address
    /// (DNS rebinding) must not reach `/mcp` or the probes.
    fn host_refusal(&self, request: &Request) -> Option<Response> {
        let value = match request.headers().get(header::HOST) {
            Some(value) => value.to_str().ok().map(str::to_owned),
            None => request.uri().authority().map(|a| a.as_str().to_owned()),
        };
        let Some((host, port)) = value.as_deref().and_then(parse_authority) else {
            return Some(
                (
                    StatusCode::BAD_REQUEST,
                    "codemode: this request has no readable Host header\n",
                )
                    .into_response(),
            );
        };
        let allowed = self
            .hosts
            .iter()
            .any(|rule| rule.host == host && rule.port.is_none_or(|p| port == Some(p)));
        if allowed {
            return None;
        }
        let shown = value.unwrap_or_default();
        Some(
            (
                StatusCode::FORBIDDEN,
                format!("codemode: requests for host {shown:?} are not served; start the server with --allowed-host {host} to serve them\n"),
            )
                .into_response(),
        )
    }

    fn origin_allowed(&self, origin: &HeaderValue) -> bool {
        let Some((scheme, host, port)) = origin.to_str().ok().and_then(parse_origin) else {
            return false;
        };
        self.origins
            .iter()
            .any(|rule| rule.allows(&scheme, &host, port))
    }

    /// The digest of the token the request carries (`None` when the server has none), or
    /// why it is refused when it carries none of them.
    fn authenticate(&self, request: &Request) -> Result<Option<[u8; 32]>, Unauthenticated> {
        if self.tokens.is_empty() {
            return Ok(None);
        }
        let presented = request
            .headers()
            .get(header::AUTHORIZATION)
            .map(HeaderValue::as_bytes)
            .and_then(|value| {
                let (scheme, rest) = value.split_at_checked(7)?;
                scheme
                    .eq_ignore_ascii_case(b"bearer ")
                    .then(|| rest.trim_ascii())
            });
        let Some(presented) = presented else {
            return Err(Unauthenticated::NoToken);
        };
        let digest: [u8; 32] = Sha256::digest(presented).into();
        // Compared with every token, whichever matches, so that the time taken says nothing
        // of which one did.
        let mut matched = false;
        for token in &self.tokens {
            matched |= token.matches_digest(&digest);
        }
        if !matched {
            return Err(Unauthenticated::WrongToken);
        }
        Ok(Some(digest))
    }

    /// Who the request comes from: the holder of the token it authenticated with, else the
    /// client of the session it names (rmcp then refuses a session it does not hold), else
    /// the anonymous client.
    fn principal(&self, token: Option<&[u8; 32]>, request: &Request) -> Principal {
        if let Some(digest) = token {
            return Principal::token(digest);
        }
        let session = request
            .headers()
            .get("mcp-session-id")
            .and_then(|id| id.to_str().ok())
            .filter(|_| !self.stateless);
        match session {
            Some(id) => Principal::session(id),
            None => Principal::anonymous(),
        }
    }
}

/// Why a request is refused with 401.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unauthenticated {
    NoToken,
    WrongToken,
}

impl Unauthenticated {
    fn response(self) -> Response {
        match self {
            Unauthenticated::NoToken => unauthorized(
                "Bearer realm=\"codemode\"",
                "codemode: this server needs `Authorization: Bearer TOKEN`\n",
            ),
            Unauthenticated::WrongToken => unauthorized(
                "Bearer realm=\"codemode\", error=\"invalid_token\"",
                "codemode: the bearer token is wrong\n",
            ),
        }
    }
}

fn unauthorized(challenge: &'static str, body: &'static str) -> Response {
    (
        StatusCode::UNAUTHORIZED,
        [(header::WWW_AUTHENTICATE, challenge)],
        body,
    )
        .into_response()
}

/// The gate and the sessions it counts, shared by every request.
struct Front {
    gate: Gate,
    sessions: Arc<BoundedSessions>,
}

/// Origin, then the token, then the Host, then room for a new session; only then rmcp (or a
/// probe), told who the client is.
async fn admit(State(front): State<Arc<Front>>, mut request: Request, next: Next) -> Response {
    if let Some(origin) = request.headers().get(header::ORIGIN) {
        if !front.gate.origin_allowed(origin) {
            let shown = String::from_utf8_lossy(origin.as_bytes()).into_owned();
            return (
                StatusCode::FORBIDDEN,
                format!("codemode: requests from origin {shown:?} are not allowed; start the server with --allowed-origin {shown} to allow them\n"),
            )
                .into_response();
        }
    }
    let open = front.gate.open_probes && probes::PATHS.contains(&request.uri().path());
    let token = if open {
        None
    } else {
        match front.gate.authenticate(&request) {
            Ok(token) => token,
            Err(refusal) => return refusal.response(),
        }
    };
    if let Some(refusal) = front.gate.host_refusal(&request) {
        return refusal;
    }
    let principal = front.gate.principal(token.as_ref(), &request);
    request.extensions_mut().insert(principal);
    // A POST without a session id is an `initialize` (or a request of a protocol without
    // sessions): it needs a place, held until the answer is ready.
    let new_session =
        request.method() == Method::POST && !request.headers().contains_key("mcp-session-id");
    let _place = if new_session {
        match front.sessions.reserve() {
            Ok(place) => Some(place),
            Err(wait) => {
                // When the first idle session expires, rounded up; sessions can also end
                // sooner, so never more than a minute.
                let seconds = (wait.as_secs() + u64::from(wait.subsec_nanos() > 0)).clamp(1, 60);
                let limit = front.sessions.limits().max_sessions;
                return (
                    StatusCode::SERVICE_UNAVAILABLE,
                    [(header::RETRY_AFTER, seconds.to_string())],
                    format!("codemode: this server already holds its most sessions ({limit}, --max-sessions); retry after {seconds}s, or end a session you no longer use (DELETE /mcp with its Mcp-Session-Id)\n"),
                )
                    .into_response();
            }
        }
    } else {
        None
    };
    next.run(request).await
}

/// Logs each request at `info`: method, path, status and how long the answer took to start.
async fn log_request(request: Request, next: Next) -> Response {
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let started = Instant::now();
    let response = next.run(request).await;
    tracing::info!(
        method = %method,
        path = %path,
        status = response.status().as_u16(),
        duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        "http request"
    );
    response
}

/// Serves `served` (and the probes, reading `observed`) until the process is asked to stop.
pub async fn serve(
    served: Arc<Served>,
    setup: HttpSetup,
    observed: Observed,
) -> Result<(), String> {
    let HttpSetup {
        listener,
        gate,
        allowed_hosts,
        limits,
        max_connections,
        header_timeout,
        idle_timeout,
        stateless,
    } = setup;
    let local = listener.local_addr().map_err(|e| e.to_string())?;
    let stop = CancellationToken::new();
    let mut hosts: Vec<String> = vec!["localhost".into(), "127.0.0.1".into(), "::1".into()];
    hosts.extend(allowed_hosts);
    let keep_alive = (idle_timeout / 3).clamp(Duration::from_millis(10), MAX_STREAM_KEEP_ALIVE);
    let config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(hosts)
        .with_sse_keep_alive(Some(keep_alive))
        .with_cancellation_token(stop.child_token());
    // Without sessions, the places still bound how many requests are answered at once.
    let sessions = BoundedSessions::new(limits);
    let factory = served.clone();
    let mcp = if stateless {
        let config = config.with_legacy_session_mode(false);
        let none = Arc::new(NeverSessionManager::default());
        let service = StreamableHttpService::new(move || Ok(factory.session()), none, config);
        axum::Router::new().nest_service("/mcp", service)
    } else {
        let service =
            StreamableHttpService::new(move || Ok(factory.session()), sessions.clone(), config);
        axum::Router::new().nest_service("/mcp", service)
    };
    let probes = probes::routes(observed, sessions.clone());
    let front = Arc::new(Front { gate, sessions });
    let router = mcp
        .merge(probes)
        .layer(axum::middleware::from_fn_with_state(front, admit))
        .layer(axum::middleware::from_fn(log_request));
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(header_timeout);
    let connections = Arc::new(Connections::new(max_connections));
    let kind = if stateless { " (stateless)" } else { "" };
    eprintln!("codemode: serving MCP{kind} at http://{local}/mcp");
    let stopping = super::stop_requested();
    tokio::pin!(stopping);
    let mut warned: Option<Instant> = None;
    loop {
        let (stream, _peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // Out of descriptors, or a connection reset before it was accepted: wait a
                    // little rather than spin.
                    if warned.is_none_or(|at| at.elapsed() > Duration::from_secs(10)) {
                        tracing::warn!("cannot accept a connection: {error} (retrying)");
                        warned = Some(Instant::now());
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut stopping => break,
        };
        // At the cap, the connection that waited longest without a request in progress makes
        // way; when every connection is answering a request, accepting waits for one to end.
        let conn = loop {
            let freed = connections.freed.notified();
            if let Some(conn) = connections.admit() {
                break Some(conn);
            }
            tokio::select! {
                () = freed => {}
                () = &mut stopping => break None,
            }
        };
        let Some(conn) = conn else {
            break;
        };
        let _ = stream.set_nodelay(true);
        let io = TokioIo::new(Watched {
            stream,
            conn: conn.clone(),
        });
        let answering = conn.clone();
        let router = TowerToHyperService::new(router.clone());
        let service = hyper::service::service_fn(move |request| {
            let running = Running::new(answering.clone());
            let call = hyper::service::Service::call(&router, request);
            async move {
                let response = call.await?;
                // A streamed answer (a call's events) keeps its request running until it is
                // sent or dropped; one of known length is as good as sent.
                Ok::<_, std::convert::Infallible>(response.map(|body| {
                    if body.size_hint().exact().is_some() {
                        return body;
                    }
                    Body::from_stream(body.into_data_stream().map(move |chunk| {
                        let _running = &running;
                        chunk
                    }))
                }))
            }
        });
        let connection = http.serve_connection(io, service);
        let stop = stop.clone();
        let connections = connections.clone();
        tokio::spawn(async move {
            tokio::pin!(connection);
            let mut asked = false;
            loop {
                tokio::select! {
                    _ = connection.as_mut() => break,
                    () = conn.evicted.cancelled() => break,
                    () = stop.cancelled(), if !asked => {
                        // A connection between requests (or still sending headers) just
                        // closes; one answering a request finishes it first.
                        if conn.running.load(Ordering::Acquire) == 0 {
                            break;
                        }
                        asked = true;
                        connection.as_mut().graceful_shutdown();
                    }
                    () = tokio::time::sleep_until(conn.last() + idle_timeout) => {
                        if conn.last().elapsed() >= idle_timeout {
                            break;
                        }
                    }
                }
            }
            connections.remove(conn.id);
        });
    }
    drop(listener);
    // Open streams end with the token; requests in progress get their answers.
    stop.cancel();
    let _ = tokio::time::timeout(SHUTDOWN_GRACE, connections.drained()).await;
    Ok(())
}

/// The open connections, at most `max` of them.
struct Connections {
    max: usize,
    next: AtomicU64,
    live: Mutex<HashMap<u64, Arc<Conn>>>,
    /// Told when a connection ends or a request's answer is sent.
    freed: Notify,
}

impl Connections {
    fn new(max: u32) -> Self {
        Self {
            max: usize::try_from(max).unwrap_or(usize::MAX).max(1),
            next: AtomicU64::new(0),
            live: Mutex::default(),
            freed: Notify::new(),
        }
    }

    fn live(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Arc<Conn>>> {
        self.live.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A new connection, if it fits: under the cap, or in the place of the connection that
    /// has waited longest without a request in progress (closed now).
    fn admit(self: &Arc<Self>) -> Option<Arc<Conn>> {
        let mut live = self.live();
        if live.len() >= self.max {
            let (&id, _) = live
                .iter()
                .filter(|(_, conn)| conn.running.load(Ordering::Acquire) == 0)
                // Compared as instants: each connection counts its milliseconds from its start.
                .min_by_key(|(_, conn)| conn.last())?;
            if let Some(victim) = live.remove(&id) {
                victim.evicted.cancel();
            }
        }
        let conn = Arc::new(Conn {
            id: self.next.fetch_add(1, Ordering::Relaxed),
            start: tokio::time::Instant::now(),
            last: AtomicU64::new(0),
            running: AtomicUsize::new(0),
            evicted: CancellationToken::new(),
            connections: Arc::downgrade(self),
        });
        live.insert(conn.id, conn.clone());
        Some(conn)
    }

    fn remove(&self, id: u64) {
        self.live().remove(&id);
        self.freed.notify_one();
    }

    /// Resolves once every connection has ended.
    async fn drained(&self) {
        loop {
            let freed = self.freed.notified();
            if self.live().is_empty() {
                return;
            }
            freed.await;
        }
    }
}

/// One connection: when something last moved on it, and how many of its requests are being
/// answered.
struct Conn {
    id: u64,
    start: tokio::time::Instant,
    /// Milliseconds after `start`.
    last: AtomicU64,
    running: AtomicUsize,
    /// Cancelled when the connection must make way for a new one.
    evicted: CancellationToken,
    connections: Weak<Connections>,
}

impl Conn {
    fn mark(&self) {
        let now = u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last.store(now, Ordering::Relaxed);
    }

    fn last(&self) -> tokio::time::Instant {
        self.start + Duration::from_millis(self.last.load(Ordering::Relaxed))
    }
}

/// A request being answered on a connection, until dropped with its answer.
struct Running(Arc<Conn>);

impl Running {
    fn new(conn: Arc<Conn>) -> Self {
        conn.running.fetch_add(1, Ordering::AcqRel);
        Self(conn)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.0.mark();
        if self.0.running.fetch_sub(1, Ordering::AcqRel) == 1 {
            if let Some(connections) = self.0.connections.upgrade() {
                connections.freed.notify_one();
            }
        }
    }
}

/// A connection's stream that records every read and write that moved bytes.
struct Watched {
    stream: TcpStream,
    conn: Arc<Conn>,
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.stream).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.conn.mark();
        }
        polled
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.stream).poll_write(cx, buf);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.conn.mark();
        }
        polled
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.stream).poll_write_vectored(cx, bufs);
        if matches!(polled, Poll::Ready(Ok(n)) if n > 0) {
            self.conn.mark();
        }
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allowed(rules: &[OriginRule], origin: &str) -> bool {
        Gate {
            tokens: Vec::new(),
            origins: rules.to_vec(),
            hosts: Vec::new(),
            open_probes: false,
            stateless: false,
        }
        .origin_allowed(&HeaderValue::from_str(origin).unwrap())
    }

    #[test]
    fn loopback_origins_are_allowed_on_any_port_and_others_are_not() {
        let rules = OriginRule::loopback();
        for origin in [
            "http://localhost",
            "http://localhost:5173",
            "https://127.0.0.1:8443",
            "http://[::1]:3000",
            "HTTP://LOCALHOST:1",
        ] {
            assert!(allowed(&rules, origin), "{origin}");
        }
        for origin in [
            "http://evil.example",
            "null",
            "http://localhost.evil.example",
            "http://127.0.0.2",
            "file://localhost",
            "http://user@localhost",
            "",
            "localhost",
        ] {
            assert!(!allowed(&rules, origin), "{origin}");
        }
    }

    #[test]
    fn configured_origins_match_scheme_host_and_port() {
        let exact = OriginRule::parse("https://app.example.com").unwrap();
        assert_eq!(exact.port, Some(443));
        let any = OriginRule::parse("http://dev.example:*").unwrap();
        let rules = [exact, any];
        assert!(allowed(&rules, "https://app.example.com"));
        assert!(allowed(&rules, "https://app.example.com:443"));
        assert!(!allowed(&rules, "https://app.example.com:8443"));
        assert!(!allowed(&rules, "http://app.example.com"));
        assert!(allowed(&rules, "http://dev.example:9000"));
        assert!(OriginRule::parse("app.example.com").is_none());
        assert!(OriginRule::parse("https://app.example.com/path").is_none());
    }

    #[test]
    fn each_token_is_a_client_of_its_own_and_without_one_the_session_is() {
        let gate = |tokens: Vec<Token>, stateless| Gate {
            tokens,
            origins: Vec::new(),
            hosts: Vec::new(),
            open_probes: false,
            stateless,
        };
        let request = |headers: &[(&str, &str)]| {
            let mut builder = axum::http::Request::builder().uri("/mcp");
            for (name, value) in headers {
                builder = builder.header(*name, *value);
            }
            builder.body(Body::empty()).unwrap()
        };
        let (alice, bob) = ("alice-0123456789abcdef", "bob-0123456789abcdef0");
        let two = gate(vec![Token::new(alice), Token::new(bob)], false);
        let as_client = |token: &str| {
            let request = request(&[("authorization", &format!("Bearer {token}"))]);
            let digest = two.authenticate(&request).ok().flatten();
            digest.map(|d| two.principal(Some(&d), &request))
        };
        let (a, b) = (as_client(alice).unwrap(), as_client(bob).unwrap());
        assert_ne!(a, b);
        assert_eq!(a, Principal::token(&Sha256::digest(alice).into()));
        assert_eq!(
            two.authenticate(&request(&[])),
            Err(Unauthenticated::NoToken)
        );
        let carol = request(&[("authorization", "Bearer carol-0123456789abcdef")]);
        assert_eq!(two.authenticate(&carol), Err(Unauthenticated::WrongToken));
        // A token wins over a session; without one, the session names the client, unless the
        // server keeps none.
        let with_session = request(&[
            ("authorization", &format!("Bearer {alice}")),
            ("mcp-session-id", "s-1"),
        ]);
        let digest = two.authenticate(&with_session).unwrap();
        assert_eq!(two.principal(digest.as_ref(), &with_session), a);
        let open = gate(Vec::new(), false);
        let in_session = request(&[("mcp-session-id", "s-1")]);
        assert_eq!(open.authenticate(&in_session), Ok(None));
        assert_eq!(open.principal(None, &in_session), Principal::session("s-1"));
        assert_eq!(open.principal(None, &request(&[])), Principal::anonymous());
        let stateless = gate(Vec::new(), true);
        assert_eq!(
            stateless.principal(None, &in_session),
            Principal::anonymous()
        );
    }

    #[test]
    fn only_loopback_and_allowed_hosts_pass_on_every_path() {
        let gate = Gate {
            tokens: Vec::new(),
            origins: Vec::new(),
            hosts: HostRule::allowed(&["mcp.example.com".into(), "proxy.example:8443".into()])
                .unwrap(),
            open_probes: true,
            stateless: false,
        };
        let status = |path: &str, host: Option<&str>| {
            let mut request = Request::builder().uri(path);
            if let Some(host) = host {
                request = request.header(header::HOST, host);
            }
            let request = request.body(Body::empty()).unwrap();
            gate.host_refusal(&request).map(|r| r.status())
        };
        for path in ["/mcp", "/healthz", "/readyz", "/metrics", "/elsewhere"] {
            for host in [
                "localhost",
                "127.0.0.1:8080",
                "[::1]:9",
                "LOCALHOST",
                "mcp.example.com",
                "mcp.example.com:443",
                "proxy.example:8443",
            ] {
                assert_eq!(status(path, Some(host)), None, "{path} {host}");
            }
            for host in [
                "evil.example",
                "localhost.evil.example",
                "127.0.0.2",
                "proxy.example:8080",
                "proxy.example",
            ] {
                assert_eq!(
                    status(path, Some(host)),
                    Some(StatusCode::FORBIDDEN),
                    "{path} {host}"
                );
            }
            assert_eq!(status(path, None), Some(StatusCode::BAD_REQUEST));
            assert_eq!(status(path, Some("a b")), Some(StatusCode::BAD_REQUEST));
        }
        assert!(HostRule::allowed(&["not a host".into()]).is_err());
    }

    #[test]
    fn tokens_compare_by_digest() {
        let token = Token::new("0123456789abcdef0123");
        assert!(token.matches(b"0123456789abcdef0123"));
        assert!(!token.matches(b"0123456789abcdef012"));
        assert!(!token.matches(b""));
    }
}
