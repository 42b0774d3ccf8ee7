//! `fetch`, a pipeline tool that makes HTTP(S) requests, off until a caller names the hosts
//! it may reach. Every URL (the first and every redirect's) must be `http`/`https` and match
//! an allowed host ([`HostPattern`]); every address a name resolves to, and every literal
//! address, must be public ([`address::refused`]) unless the private network is allowed.
//! Request and response bodies are capped, the whole exchange has a deadline, and headers a
//! host adds from its own environment ([`SecretHeader`]) never reach the program: they are
//! not in the arguments, not sent once a redirect leaves their host, and their values are
//! cut out of what the server answers.
//!
//! The tool is marked as the Web's fetch ([`ToolDefinitionBuilder::web_fetch`]): a
//! TypeScript program's global `fetch(url, init?)` goes through it, and preflight refuses a
//! literal URL [`Fetcher::check_url`] refuses.
//!
//! [`ToolDefinitionBuilder::web_fetch`]: codemode_runtime::tools::ToolDefinitionBuilder::web_fetch

pub mod address;
pub mod hosts;
mod resolver;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use codemode_runtime::code::UrlCheck;
use codemode_runtime::tools::schema::dsl::Parameters;
use codemode_runtime::tools::schema::dsl::{boolean, integer, object, string, Annotate};
use codemode_runtime::tools::{
    ContentBlock, RegistrationGuard, Registry, RegistryError, Schema, ToolDefinition, ToolError,
    ToolOutput,
};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use reqwest::{Method, StatusCode};
use serde_json::{json, Map, Value};
use url::{Host, Url};

pub use hosts::HostPattern;

/// Default cap on a request's and a response's body.
pub const DEFAULT_MAX_BYTES: u64 = 5 * 1024 * 1024;
/// Default deadline of one fetch, redirects and body included.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
/// Most redirects one fetch follows.
pub const MAX_REDIRECTS: usize = 10;

/// What a fetch may reach and how much it may carry.
#[derive(Debug, Clone)]
pub struct FetchConfig {
    /// The hosts a URL may name; empty: nothing can be fetched.
    pub allow_hosts: Vec<HostPattern>,
    /// Reach loopback, private, link-local and metadata addresses too.
    pub allow_private_network: bool,
    /// Most bytes of a request body, and of a response body (past it the body is cut and
    /// `truncated` is true).
    pub max_bytes: u64,
    /// Deadline of one fetch, from the first request to the response's last byte.
    pub timeout: Duration,
    /// Headers added from the host's environment to requests for their host.
    pub headers: Vec<SecretHeader>,
}

impl Default for FetchConfig {
    fn default() -> Self {
        Self {
            allow_hosts: Vec::new(),
            allow_private_network: false,
            max_bytes: DEFAULT_MAX_BYTES,
            timeout: DEFAULT_TIMEOUT,
            headers: Vec::new(),
        }
    }
}

/// A header the host adds to requests for `host` (`--fetch-header HOST=NAME:ENV_VAR`). Its
/// value is never shown: not by `Debug`, not to the program.
#[derive(Clone)]
pub struct SecretHeader {
    host: HostPattern,
    name: HeaderName,
    value: HeaderValue,
    /// The value's text, for cutting it out of responses.
    text: Arc<str>,
}

impl fmt::Debug for SecretHeader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "SecretHeader({} for {}, value hidden)",
            self.name, self.host
        )
    }
}

impl SecretHeader {
    /// A header `name: value` for requests to `host`.
    pub fn new(host: HostPattern, name: &str, value: &str) -> Result<Self, String> {
        let name = HeaderName::from_bytes(name.trim().as_bytes())
            .map_err(|_| format!("{name:?} is not a header name"))?;
        let mut header = HeaderValue::from_str(value)
            .map_err(|_| format!("the value for header {name} is not a valid header value"))?;
        header.set_sensitive(true);
        Ok(Self {
            host,
            name,
            value: header,
            text: value.into(),
        })
    }

    /// Parses `HOST=NAME:ENV_VAR`, reading the variable with `env`.
    pub fn from_spec(spec: &str, env: impl Fn(&str) -> Option<String>) -> Result<Self, String> {
        let (host, header) = spec
            .split_once('=')
            .ok_or_else(|| format!("{spec:?}: expected HOST=NAME:ENV_VAR"))?;
        let (name, variable) = header
            .split_once(':')
            .ok_or_else(|| format!("{spec:?}: expected HOST=NAME:ENV_VAR"))?;
        let host = HostPattern::parse(host)?;
        let variable = variable.trim();
        if variable.is_empty() {
            return Err(format!(
                "{spec:?}: name the environment variable that holds the value"
            ));
        }
        let value = env(variable)
            .ok_or_else(|| format!("{spec:?}: the environment variable {variable} is not set"))?;
        Self::new(host, name, &value).map_err(|e| format!("{spec:?}: {e}"))
    }

    /// The host the header is for.
    pub fn host(&self) -> &HostPattern {
        &self.host
    }
}

/// Makes the requests; one per tool, shared by its calls.
pub struct Fetcher {
    config: FetchConfig,
    client: reqwest::Client,
}

impl fmt::Debug for Fetcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Fetcher")
            .field("config", &self.config)
            .finish()
    }
}

/// Request headers a program may not set: they frame the message or pick its destination,
/// which are the fetcher's to decide.
const FRAMING_HEADERS: [&str; 10] = [
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "upgrade",
    "te",
    "trailer",
    "proxy-authorization",
    "proxy-connection",
];

/// Request headers that carry credentials: dropped when a redirect leaves the first host.
const CREDENTIAL_HEADERS: [&str; 3] = ["authorization", "cookie", "proxy-authorization"];

impl Fetcher {
    /// A fetcher for `config`; `Err` when no HTTP client can be made (no TLS roots).
    pub fn new(config: FetchConfig) -> Result<Self, String> {
        // Another part of the process may have installed it first; either way ring serves.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .dns_resolver(Arc::new(resolver::Guarded {
                allow_private_network: config.allow_private_network,
            }))
            .user_agent(concat!("codemode/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| format!("cannot make an HTTP client: {}", chain(&e)))?;
        Ok(Self { config, client })
    }

    /// Parses `text` and checks what its text decides: the scheme, the host against the
    /// allowed ones, a literal address against the refused ranges.
    pub fn check_url(&self, text: &str) -> Result<Url, String> {
        let url = Url::parse(text).map_err(|e| {
            format!("{text:?} is not an absolute URL ({e}); write it with http:// or https://")
        })?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(format!(
                "{text:?}: only http and https URLs are fetched, not {}:",
                url.scheme()
            ));
        }
        let Some(host) = url.host() else {
            return Err(format!("{text:?} names no host"));
        };
        if !self.config.allow_hosts.iter().any(|p| p.matches(&url)) {
            let at = host_port(&url);
            return Err(if self.config.allow_hosts.is_empty() {
                format!("{at} is not an allowed host: no host is (codemode runs fetch with --allow-host HOST for each host it may reach)")
            } else {
                let allowed: Vec<String> = self
                    .config
                    .allow_hosts
                    .iter()
                    .map(|p| p.to_string())
                    .collect();
                format!(
                    "{at} is not an allowed host (allowed: {}); a person can allow it with --allow-host {}",
                    allowed.join(", "),
                    host
                )
            });
        }
        if !self.config.allow_private_network {
            let literal = match host {
                Host::Ipv4(v4) => Some(std::net::IpAddr::V4(v4)),
                Host::Ipv6(v6) => Some(std::net::IpAddr::V6(v6)),
                Host::Domain(_) => None,
            };
            if let Some(kind) = literal.and_then(address::refused) {
                return Err(format!(
                    "{host} is a {kind} address; fetch does not reach the host's own network unless codemode runs with --allow-private-network"
                ));
            }
        }
        Ok(url)
    }

    /// The check preflight runs on literal URLs.
    pub fn url_check(self: &Arc<Self>) -> UrlCheck {
        let fetcher = self.clone();
        UrlCheck(Arc::new(move |url| {
            fetcher
                .check_url(url)
                .map(drop)
                .map_err(|e| format!("fetch: {e}"))
        }))
    }

    /// One fetch: the request `args` describe, redirects followed and checked, the response
    /// as the tool's result.
    pub async fn fetch(&self, args: &Value) -> Result<Value, ToolError> {
        let request = Request::from_args(args, self.config.max_bytes)?;
        let url = self.check_url(&request.url).map_err(refused)?;
        let asked = request.url.clone();
        let limit = self.config.timeout;
        match tokio::time::timeout(limit, self.exchange(request, url)).await {
            Ok(result) => result,
            Err(_) => Err(ToolError::new(format!(
                "fetch: {} did not answer within {} ms (the limit is --fetch-timeout-ms)",
                asked,
                limit.as_millis()
            ))),
        }
    }

    async fn exchange(&self, request: Request, first: Url) -> Result<Value, ToolError> {
        let Request {
            mut method,
            mut headers,
            mut body,
            ..
        } = request;
        let origin = host_port(&first);
        let mut url = first;
        let mut left_origin = false;
        for hop in 0..=MAX_REDIRECTS {
            let mut outgoing = headers.clone();
            if !left_origin {
                for secret in &self.config.headers {
                    if secret.host.matches(&url) {
                        outgoing.insert(secret.name.clone(), secret.value.clone());
                    }
                }
            }
            let mut builder = self
                .client
                .request(method.clone(), url.clone())
                .headers(outgoing);
            if let Some(body) = &body {
                builder = builder.body(body.clone());
            }
            let response = builder.send().await.map_err(|e| {
                ToolError::new(format!("fetch: {}: {}", url, self.redact(&chain(&e))))
            })?;
            let status = response.status();
            let location = response
                .headers()
                .get(reqwest::header::LOCATION)
                .and_then(|l| l.to_str().ok())
                .map(str::to_owned);
            let (true, Some(location)) = (is_redirect(status), location) else {
                return self.result(response, &url, hop > 0).await;
            };
            if hop == MAX_REDIRECTS {
                break;
            }
            let next = url.join(&location).map_err(|e| {
                ToolError::new(format!(
                    "fetch: {url} redirected to {location:?}, which is not a URL ({e})"
                ))
            })?;
            let next = self.check_url(next.as_str()).map_err(|e| {
                ToolError::new(format!(
                    "fetch: {url} redirected to {next}, which is refused: {e}"
                ))
            })?;
            if status == StatusCode::SEE_OTHER
                || (matches!(status, StatusCode::MOVED_PERMANENTLY | StatusCode::FOUND)
                    && method == Method::POST)
            {
                method = Method::GET;
                body = None;
                headers.remove(reqwest::header::CONTENT_TYPE);
            }
            if host_port(&next) != origin && !left_origin {
                left_origin = true;
                for name in CREDENTIAL_HEADERS {
                    headers.remove(name);
                }
            }
            url = next;
        }
        Err(ToolError::new(format!(
            "fetch: more than {MAX_REDIRECTS} redirects, the last to {url}"
        )))
    }

    async fn result(
        &self,
        mut response: reqwest::Response,
        url: &Url,
        redirected: bool,
    ) -> Result<Value, ToolError> {
        let status = response.status();
        let mut headers = Map::new();
        for (name, value) in response.headers() {
            let text = self.redact(&String::from_utf8_lossy(value.as_bytes()));
            match headers.get_mut(name.as_str()) {
                Some(Value::String(existing)) => {
                    existing.push_str(", ");
                    existing.push_str(&text);
                }
                _ => {
                    headers.insert(name.as_str().to_owned(), Value::String(text));
                }
            }
        }
        let binary_type = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|t| t.to_str().ok())
            .is_some_and(is_binary_type);
        let cap = usize::try_from(self.config.max_bytes).unwrap_or(usize::MAX);
        let mut bytes = Vec::new();
        let mut truncated = false;
        loop {
            let chunk = response.chunk().await.map_err(|e| {
                ToolError::new(format!(
                    "fetch: {url}: reading the response: {}",
                    self.redact(&chain(&e))
                ))
            })?;
            let Some(chunk) = chunk else { break };
            let room = cap - bytes.len();
            if chunk.len() > room {
                bytes.extend_from_slice(&chunk[..room]);
                truncated = true;
                break;
            }
            bytes.extend_from_slice(&chunk);
        }
        drop(response);
        let bytes = self.redact_bytes(bytes);
        let (body, encoding) = match text_of(&bytes, truncated) {
            Some(text) if !binary_type => (text, "text"),
            _ => (
                base64::engine::general_purpose::STANDARD.encode(&bytes),
                "base64",
            ),
        };
        Ok(json!({
            "url": url.as_str(),
            "status": status.as_u16(),
            "statusText": status.canonical_reason().unwrap_or(""),
            "redirected": redirected,
            "headers": headers,
            "body": body,
            "encoding": encoding,
            "truncated": truncated,
        }))
    }

    /// `text` with every secret header value replaced.
    fn redact(&self, text: &str) -> String {
        // A secret is valid UTF-8, so replacing it keeps the text valid.
        String::from_utf8_lossy(&self.redact_bytes(text.as_bytes().to_vec())).into_owned()
    }

    /// `bytes` with every secret header value replaced by `[hidden]`.
    fn redact_bytes(&self, mut bytes: Vec<u8>) -> Vec<u8> {
        for secret in &self.config.headers {
            let needle = secret.text.as_bytes();
            if needle.is_empty() || bytes.len() < needle.len() {
                continue;
            }
            let mut out = Vec::with_capacity(bytes.len());
            let mut at = 0;
            while at < bytes.len() {
                if bytes[at..].starts_with(needle) {
                    out.extend_from_slice(b"[hidden]");
                    at += needle.len();
                } else {
                    out.push(bytes[at]);
                    at += 1;
                }
            }
            bytes = out;
        }
        bytes
    }
}

/// The body as text: valid UTF-8, or a cut body whose last character the cap split.
fn text_of(bytes: &[u8], truncated: bool) -> Option<String> {
    match std::str::from_utf8(bytes) {
        Ok(text) => Some(text.to_owned()),
        Err(e) if truncated && e.error_len().is_none() => {
            Some(String::from_utf8_lossy(&bytes[..e.valid_up_to()]).into_owned())
        }
        Err(_) => None,
    }
}

/// Media types whose bodies are bytes even when they happen to be valid UTF-8.
fn is_binary_type(content_type: &str) -> bool {
    let essence = content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    let (kind, sub) = essence.split_once('/').unwrap_or((&essence, ""));
    matches!(kind, "image" | "audio" | "video" | "font")
        || matches!(
            sub,
            "octet-stream" | "pdf" | "zip" | "gzip" | "x-tar" | "wasm" | "x-protobuf" | "protobuf"
        )
}

fn is_redirect(status: StatusCode) -> bool {
    matches!(status.as_u16(), 301 | 302 | 303 | 307 | 308)
}

/// `host:port` as the connection sees it.
fn host_port(url: &Url) -> String {
    match (url.host_str(), url.port_or_known_default()) {
        (Some(host), Some(port)) => format!("{host}:{port}"),
        (Some(host), None) => host.to_owned(),
        _ => String::new(),
    }
}

fn refused(reason: String) -> ToolError {
    ToolError::new(format!("fetch: {reason}"))
}

/// An error with its causes, the resolver's refusal among them.
fn chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut parts: Vec<String> = vec![error.to_string()];
    let mut source = error.source();
    while let Some(cause) = source {
        if let Some(refusal) = cause.downcast_ref::<resolver::Refused>() {
            return refusal.to_string();
        }
        let text = cause.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        source = cause.source();
    }
    parts.join(": ")
}

/// A request as the program described it, checked.
struct Request {
    url: String,
    method: Method,
    headers: HeaderMap,
    body: Option<Vec<u8>>,
}

impl Request {
    fn from_args(args: &Value, max_bytes: u64) -> Result<Self, ToolError> {
        let url = args
            .get("url")
            .and_then(Value::as_str)
            .ok_or_else(|| ToolError::invalid_arguments("\"url\" must be a string"))?
            .to_owned();
        let method = match args.get("method") {
            None | Some(Value::Null) => Method::GET,
            Some(Value::String(name)) => {
                let upper = name.to_ascii_uppercase();
                let method = Method::from_bytes(upper.as_bytes()).map_err(|_| {
                    ToolError::invalid_arguments(format!("{name:?} is not an HTTP method"))
                })?;
                if matches!(method.as_str(), "CONNECT" | "TRACE" | "TRACK") {
                    return Err(ToolError::invalid_arguments(format!(
                        "fetch does not make {method} requests"
                    )));
                }
                method
            }
            Some(_) => return Err(ToolError::invalid_arguments("\"method\" must be a string")),
        };
        let mut headers = HeaderMap::new();
        match args.get("headers") {
            None | Some(Value::Null) => {}
            Some(Value::Object(given)) => {
                for (name, value) in given {
                    let Some(value) = value.as_str() else {
                        return Err(ToolError::invalid_arguments(format!(
                            "header {name:?} must be a string"
                        )));
                    };
                    let header = HeaderName::from_bytes(name.as_bytes()).map_err(|_| {
                        ToolError::invalid_arguments(format!("{name:?} is not a header name"))
                    })?;
                    if FRAMING_HEADERS.contains(&header.as_str()) {
                        return Err(ToolError::invalid_arguments(format!(
                            "the {header} header is set by fetch itself, not by the program"
                        )));
                    }
                    let value = HeaderValue::from_str(value).map_err(|_| {
                        ToolError::invalid_arguments(format!(
                            "the value of header {name:?} is not a valid header value"
                        ))
                    })?;
                    headers.append(header, value);
                }
            }
            Some(_) => {
                return Err(ToolError::invalid_arguments(
                    "\"headers\" must be an object of header names to strings".to_owned(),
                ))
            }
        }
        let body = match args.get("body") {
            None | Some(Value::Null) => None,
            Some(Value::String(text)) => {
                if matches!(method, Method::GET | Method::HEAD) {
                    return Err(ToolError::invalid_arguments(format!(
                        "a {method} request cannot have a body"
                    )));
                }
                if text.len() as u64 > max_bytes {
                    return Err(ToolError::invalid_arguments(format!(
                        "the body is {} bytes, more than the {max_bytes} a request may carry (--fetch-max-bytes)",
                        text.len()
                    )));
                }
                Some(text.as_bytes().to_vec())
            }
            Some(_) => {
                return Err(ToolError::invalid_arguments(
                    "\"body\" must be a string (JSON.stringify an object first)".to_owned(),
                ))
            }
        };
        Ok(Self {
            url,
            method,
            headers,
            body,
        })
    }
}

fn schema(result: Result<Schema, codemode_runtime::tools::SchemaError>) -> Schema {
    // Both schemas are literals of the DSL, checked by this crate's registration test.
    result.unwrap_or_else(|_| Schema::empty_parameters())
}

/// The `fetch` tool over `fetcher`.
pub fn definition(fetcher: Arc<Fetcher>) -> ToolDefinition {
    let allowed: Vec<String> = fetcher
        .config
        .allow_hosts
        .iter()
        .map(|p| p.to_string())
        .collect();
    let parameters = Parameters::new()
        .required(
            "url",
            string().description("An http:// or https:// URL on an allowed host."),
        )
        .optional(
            "method",
            string().description("GET (the default), POST, PUT, PATCH, DELETE, HEAD or OPTIONS."),
        )
        .optional(
            "headers",
            object(true).description("Request headers, name to string value."),
        )
        .optional(
            "body",
            string().description("The request body as text (JSON.stringify an object)."),
        );
    let output = object(false)
        .required(
            "url",
            string().description("The URL that answered, after redirects."),
        )
        .required("status", integer())
        .required("statusText", string())
        .required("redirected", boolean())
        .required(
            "headers",
            object(true).description("Response headers, lower-case name to value."),
        )
        .required(
            "body",
            string().description("The body: text, or base64 when `encoding` says so."),
        )
        .required("encoding", string().enum_values(["text", "base64"]))
        .required(
            "truncated",
            boolean().description("The body was cut at the byte cap."),
        );
    let check = fetcher.url_check();
    ToolDefinition::builder("fetch")
        .description(format!(
            "Make an HTTP request to an allowed host ({}) and return the response. Redirects are followed when they stay on allowed hosts; the response body is text, or base64 for binary content. TypeScript programs can also call the global fetch(url, init?), which answers with a Response.",
            allowed.join(", ")
        ))
        .parameters(schema(Schema::parameters(parameters)))
        .output(ToolOutput::new(schema(Schema::value(output)), render))
        .concurrency_safe(|args| {
            let method = args.get("method").and_then(Value::as_str).unwrap_or("GET");
            ["GET", "HEAD", "OPTIONS"].iter().any(|m| m.eq_ignore_ascii_case(method))
        })
        .web_fetch(check)
        .execute(move |args, ctx| {
            let fetcher = fetcher.clone();
            async move {
                tokio::select! {
                    result = fetcher.fetch(&args) => result,
                    reason = ctx.signal().aborted() => Err(ToolError::new(format!("fetch aborted: {reason}"))),
                }
            }
        })
        .build()
}

/// What the model reads of a result: status line, then the body.
fn render(_args: &Value, value: &Value) -> Result<Vec<ContentBlock>, ToolError> {
    let status = value.get("status").and_then(Value::as_u64).unwrap_or(0);
    let body = value.get("body").and_then(Value::as_str).unwrap_or("");
    Ok(vec![ContentBlock::text(format!("HTTP {status}\n{body}"))])
}

/// Registers `fetch` for `config`.
pub fn register(registry: &Registry, config: FetchConfig) -> Result<RegistrationGuard, String> {
    let fetcher = Arc::new(Fetcher::new(config)?);
    registry
        .register(definition(fetcher), None)
        .map_err(|e: RegistryError| e.to_string())
}
