//! An upstream server at a URL, over streamable HTTP: rmcp's client on reqwest, with TLS by
//! rustls (the ring provider, the platform's trusted roots), authorized with OAuth where the
//! server asks for it (`oauth/`) unless the configuration sets `Authorization` itself.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use rmcp::model::Tool;
use rmcp::transport::auth::AuthClient;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::StreamableHttpClientTransport;

use super::connection::{Client, Connection};
use super::oauth::{self, Grant, OAuthSettings, Token};
use super::spec::UpstreamError;

/// The most times a person is asked to authorize while connecting: once, and once more should
/// the server have moved to another authorization server since (its tokens then no longer
/// count, and codemode registers with the new one).
const AUTHORIZATIONS: u32 = 2;
/// Headers the transport sets itself: a configuration may not.
const RESERVED: [&str; 3] = ["accept", "mcp-session-id", "last-event-id"];

/// Where to reach a server at a URL.
pub(super) struct Remote<'a> {
    pub(super) name: &'a str,
    pub(super) url: &'a str,
    pub(super) headers: &'a BTreeMap<String, String>,
    pub(super) oauth: Option<&'a OAuthSettings>,
}

/// A refusal of a token no person granted (`what`), which logging in would not change: a
/// handshake error that says so.
fn refused_token(error: UpstreamError, what: &str) -> UpstreamError {
    match error {
        UpstreamError::Unauthorized { name, problem, .. } => UpstreamError::Handshake {
            name,
            reason: format!("it refused {what}: {problem}"),
            stderr_tail: String::new(),
        },
        other => other,
    }
}

/// The HTTP client of an authorized connection: no redirect is followed, so the token goes
/// to the server's own address only.
fn http_client() -> Result<reqwest::Client, String> {
    reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| format!("cannot make an HTTP client: {e}"))
}

/// Connects to the server with its headers on every request and lists its tools; where it
/// asks for authorization and none is kept, a person (if there is one) is asked to authorize
/// once.
pub(super) async fn connect(
    remote: Remote<'_>,
    client: Client,
    timeout: Duration,
) -> Result<(Connection, Vec<Tool>), UpstreamError> {
    let Remote {
        name,
        url,
        headers,
        oauth,
    } = remote;
    // Installed once per process; a provider installed before (by anyone) is kept.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let refused = |header: &str, problem: String| UpstreamError::Config {
        at: format!("mcpServers.{name}.headers.{header}: "),
        problem,
    };
    let mut custom = HashMap::new();
    for (header, value) in headers {
        if RESERVED.iter().any(|r| header.eq_ignore_ascii_case(r)) {
            return Err(refused(
                header,
                "codemode's MCP client sets this header itself".into(),
            ));
        }
        let header_name = http::HeaderName::from_bytes(header.as_bytes())
            .map_err(|e| refused(header, format!("not a header name ({e})")))?;
        let mut header_value = http::HeaderValue::from_str(value)
            .map_err(|e| refused(header, format!("not a header value ({e})")))?;
        header_value.set_sensitive(true);
        custom.insert(header_name, header_value);
    }
    let config = StreamableHttpClientTransportConfig::with_uri(url).custom_headers(custom);
    if config
        .custom_headers
        .contains_key(&http::header::AUTHORIZATION)
    {
        // The configuration authorizes itself (a static token).
        let transport = || StreamableHttpClientTransport::from_config(config.clone());
        return Connection::over(name, transport, client, timeout)
            .await
            .map_err(|e| refused_token(e, "the configured Authorization header"));
    }
    let settings = oauth.cloned().unwrap_or_default();
    let failed = |reason: String| UpstreamError::Handshake {
        name: name.to_owned(),
        reason,
        stderr_tail: String::new(),
    };
    let http = http_client().map_err(failed)?;
    let authorization = client.authorization.clone();
    let token = oauth::token_without_a_person(url, &settings)
        .await
        .map_err(failed)?;
    match token {
        Some(Token::Bearer(token)) => {
            let config = config.auth_header(token);
            let transport =
                || StreamableHttpClientTransport::with_client(http.clone(), config.clone());
            return Connection::over(name, transport, client, timeout)
                .await
                .map_err(|e| refused_token(e, "the token of its cross-app access"));
        }
        Some(Token::Manager(manager)) => {
            let with_token = AuthClient::new(http, *manager);
            let transport =
                || StreamableHttpClientTransport::with_client(with_token.clone(), config.clone());
            return Connection::over(name, transport, client, timeout)
                .await
                .map_err(|e| refused_token(e, "the token of its client credentials"));
        }
        None => {}
    }
    let store = authorization.store(name, url);
    let mut authorized = 0;
    loop {
        let manager = oauth::manager(url, store.clone()).await.map_err(failed)?;
        let with_token = AuthClient::new(http.clone(), manager);
        let transport =
            || StreamableHttpClientTransport::with_client(with_token.clone(), config.clone());
        let error = match Connection::over(name, transport, client.clone(), timeout).await {
            Err(UpstreamError::Unauthorized { challenge, .. }) => challenge,
            other => return other,
        };
        let person = authorization.person();
        let (Some(person), Some(store), true, Grant::AuthorizationCode) =
            (person, &store, authorized < AUTHORIZATIONS, settings.grant)
        else {
            let problem = if authorized > 0 {
                "still refuses the authorization just granted".to_owned()
            } else {
                "needs authorization (OAuth) and codemode has none for it".to_owned()
            };
            return Err(UpstreamError::Unauthorized {
                name: name.to_owned(),
                problem,
                command: authorization.login_command(name),
                challenge: error,
            });
        };
        let login = oauth::Login {
            name,
            url,
            settings: &settings,
            store: store.clone(),
            challenge: Some(&error),
            scopes: Vec::new(),
        };
        authorization.ask(person, login).await.map_err(failed)?;
        authorized += 1;
    }
}
