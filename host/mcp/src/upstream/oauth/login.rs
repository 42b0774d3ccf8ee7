//! The authorization-code flow with a person: codemode shows the authorization URL (and opens
//! it with `$BROWSER` when that is set), receives the redirect on a loopback port, and exchanges
//! the code (PKCE, the resource indicator, and the registration rmcp picks: a registered client,
//! a Client ID Metadata Document, or dynamic registration) for tokens it keeps sealed.

use std::time::Duration;

use rmcp::transport::auth::{AuthorizationCallback, AuthorizationRequest, OAuthState};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;

use super::settings::OAuthSettings;
use super::store::SealedStore;
use super::{manager, Person};

/// How long the person has to authorize in the browser.
pub(crate) const LOGIN_TIMEOUT: Duration = Duration::from_secs(300);
/// The longest request line (and headers) read from the browser's redirect.
const MAX_REQUEST: usize = 16 * 1024;

/// The port of a loopback redirect URI codemode can receive (`http`, `127.0.0.1`, `[::1]` or
/// `localhost`, a port given).
pub(crate) fn loopback_port(uri: &str) -> Option<u16> {
    let url = url::Url::parse(uri).ok()?;
    let loopback = match url.host()? {
        url::Host::Domain(host) => host.eq_ignore_ascii_case("localhost"),
        url::Host::Ipv4(ip) => ip.is_loopback(),
        url::Host::Ipv6(ip) => ip.is_loopback(),
    };
    (url.scheme() == "http" && loopback)
        .then(|| url.port())
        .flatten()
}

/// What the flow is asked for.
pub(crate) struct Login<'a> {
    pub(crate) name: &'a str,
    pub(crate) url: &'a str,
    pub(crate) settings: &'a OAuthSettings,
    pub(crate) store: SealedStore,
    /// The server's `WWW-Authenticate` challenge, if it sent one.
    pub(crate) challenge: Option<&'a str>,
    /// Scopes to ask for besides those the settings or the challenge name (those granted
    /// before, when a wider scope is needed).
    pub(crate) scopes: Vec<String>,
}

/// Runs the flow with `person`; the tokens are kept in the login's store. Returns the scopes
/// granted.
pub(crate) async fn authorize(login: Login<'_>, person: &Person) -> Result<Vec<String>, String> {
    let Login {
        name,
        url,
        settings,
        store,
        challenge,
        scopes,
    } = login;
    let (listener, redirect_uri) = listen(settings.redirect_uri.as_deref()).await?;
    let manager = manager(url, Some(store)).await?;
    let mut request = AuthorizationRequest::new(redirect_uri).with_client_name("codemode");
    if let Some(client_id) = &settings.client_id {
        request = request.with_preregistered_client(client_id);
        if let Some(secret) = &settings.client_secret {
            request = request.with_client_secret(secret);
        }
    }
    if let Some(metadata) = &settings.client_metadata_url {
        request = request.with_client_metadata_url(metadata);
    }
    if let Some(challenge) = challenge {
        request = request.with_challenge(challenge);
    }
    let mut wanted = settings.scopes();
    wanted.extend(scopes);
    if let Some(scope) = challenge.and_then(challenged_scope) {
        wanted.extend(scope.split_whitespace().map(str::to_owned));
    }
    let mut seen = std::collections::HashSet::new();
    wanted.retain(|scope| seen.insert(scope.clone()));
    if !wanted.is_empty() {
        request = request.with_scopes(wanted);
    }
    let mut state = OAuthState::Unauthorized(manager);
    state
        .start_authorization(request)
        .await
        .map_err(|e| format!("cannot start authorizing to mcp server \"{name}\": {e}"))?;
    let authorization_url = state
        .get_authorization_url()
        .await
        .map_err(|e| e.to_string())?;
    person.show(name, &authorization_url);
    let callback = tokio::time::timeout(LOGIN_TIMEOUT, receive(&listener))
        .await
        .map_err(|_| {
            format!(
                "no authorization for mcp server \"{name}\" within {}: the browser never came back to codemode",
                humantime::format_duration(LOGIN_TIMEOUT)
            )
        })??;
    state
        .handle_callback_with_issuer(
            &callback.code,
            &callback.csrf_token,
            callback.issuer.as_deref(),
        )
        .await
        .map_err(|e| format!("authorizing to mcp server \"{name}\" failed: {e}"))?;
    let manager = state
        .into_authorization_manager()
        .ok_or_else(|| format!("authorizing to mcp server \"{name}\" did not complete"))?;
    Ok(manager.get_current_scopes().await)
}

/// The `scope` a `WWW-Authenticate` challenge names.
pub(crate) fn challenged_scope(challenge: &str) -> Option<String> {
    let base = url::Url::parse("http://localhost/").ok()?;
    rmcp::transport::auth::WWWAuthenticateParams::parse(challenge, &base).scope
}

/// A listener for the redirect, and the redirect URI that reaches it.
async fn listen(redirect_uri: Option<&str>) -> Result<(TcpListener, String), String> {
    match redirect_uri {
        Some(uri) => {
            let port = loopback_port(uri)
                .ok_or_else(|| format!("{uri} is not a loopback redirect URI with a port"))?;
            let listener = TcpListener::bind(("127.0.0.1", port))
                .await
                .map_err(|e| format!("cannot listen on 127.0.0.1:{port} for {uri}: {e}"))?;
            Ok((listener, uri.to_owned()))
        }
        None => {
            let listener = TcpListener::bind(("127.0.0.1", 0))
                .await
                .map_err(|e| format!("cannot listen on a loopback port for the redirect: {e}"))?;
            let port = listener.local_addr().map_err(|e| e.to_string())?.port();
            Ok((listener, format!("http://127.0.0.1:{port}/callback")))
        }
    }
}

/// Waits for the browser's redirect carrying the code (or the server's error); other requests
/// (a favicon) are answered and ignored.
async fn receive(listener: &TcpListener) -> Result<AuthorizationCallback, String> {
    loop {
        let (stream, _) = listener
            .accept()
            .await
            .map_err(|e| format!("the redirect listener failed: {e}"))?;
        let mut reader = BufReader::new(stream);
        let mut line = String::new();
        let read = tokio::time::timeout(
            Duration::from_secs(10),
            (&mut reader).take(MAX_REQUEST as u64).read_line(&mut line),
        )
        .await;
        if !matches!(read, Ok(Ok(n)) if n > 0) {
            continue;
        }
        let target = line.split_whitespace().nth(1).unwrap_or("/").to_owned();
        let full = format!("http://127.0.0.1{target}");
        let query: Vec<(String, String)> = url::Url::parse(&full)
            .map(|u| u.query_pairs().into_owned().collect())
            .unwrap_or_default();
        let get = |key: &str| query.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone());
        let (status, page, outcome) = if let Some(error) = get("error") {
            let description = get("error_description").unwrap_or_default();
            (
                "400 Bad Request",
                "codemode: the authorization was refused. You may close this page.",
                Some(Err(format!(
                    "the authorization server refused: {error}{}",
                    if description.is_empty() {
                        String::new()
                    } else {
                        format!(" ({description})")
                    }
                ))),
            )
        } else if get("code").is_some() {
            match AuthorizationCallback::from_redirect_url(&full) {
                Ok(callback) => (
                    "200 OK",
                    "codemode: authorized. You may close this page.",
                    Some(Ok(callback)),
                ),
                Err(e) => (
                    "400 Bad Request",
                    "codemode: the redirect was incomplete.",
                    Some(Err(e.to_string())),
                ),
            }
        } else {
            ("404 Not Found", "", None)
        };
        let mut stream = reader.into_inner();
        let response = format!(
            "HTTP/1.1 {status}\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{page}",
            page.len()
        );
        let _ = stream.write_all(response.as_bytes()).await;
        let _ = stream.shutdown().await;
        if let Some(outcome) = outcome {
            return outcome;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_http_redirects_with_a_port_are_received() {
        assert_eq!(loopback_port("http://127.0.0.1:8976/callback"), Some(8976));
        assert_eq!(loopback_port("http://localhost:3000/cb"), Some(3000));
        assert_eq!(loopback_port("http://[::1]:3000/cb"), Some(3000));
        assert_eq!(loopback_port("http://localhost/cb"), None);
        assert_eq!(loopback_port("https://127.0.0.1:3000/cb"), None);
        assert_eq!(loopback_port("http://example.com:3000/cb"), None);
    }

    #[test]
    fn a_challenge_names_its_scope() {
        assert_eq!(
            challenged_scope(r#"Bearer error="insufficient_scope", scope="mcp:basic mcp:write""#)
                .as_deref(),
            Some("mcp:basic mcp:write")
        );
        assert_eq!(challenged_scope("Bearer"), None);
    }
}
