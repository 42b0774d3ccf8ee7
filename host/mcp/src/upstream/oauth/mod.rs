//! OAuth 2.1 for upstream servers at URLs, as the MCP authorization spec describes it, on
//! rmcp's implementation: protected-resource and authorization-server metadata discovery
//! (OAuth and OpenID), PKCE, resource indicators, registration (a registered client, a Client
//! ID Metadata Document, else dynamic registration), scopes from the server's challenge with
//! step-up on `insufficient_scope`, refresh, and the grants without a person (client
//! credentials with a secret or a signed key; cross-app access).
//!
//! Tokens a person granted are kept sealed in the state store (`store.rs`) and refreshed (by
//! rmcp, 30 s before they expire, the new ones kept); those of the grants without a person are
//! made at each connection and kept in memory. A token travels only in the `Authorization` header of requests to its
//! server: never to a program, a command, a log line, an event or a trace.

mod login;
mod machine;
pub mod settings;
mod store;

use std::path::PathBuf;
use std::sync::Arc;

pub use codemode_durable::Credentials;
use rmcp::transport::auth::AuthorizationManager;

use super::spec::{Transport, UpstreamSpec};

pub(crate) use login::{authorize, challenged_scope, Login};
pub(crate) use machine::{token_without_a_person, Token};
pub use settings::{Grant, OAuthSettings};
pub(crate) use store::SealedStore;

/// A person who can authorize in a browser: the authorization URL is written on stderr and,
/// when `$BROWSER` is set, opened with it.
#[derive(Debug, Clone)]
pub struct Person {
    browser: Option<String>,
}

impl Person {
    /// A person whose browser is `browser` (else the address is only shown).
    pub fn new(browser: Option<String>) -> Self {
        Self { browser }
    }

    /// The person at this terminal, if there is one (stderr is a terminal, or `$BROWSER` is
    /// set to open the URL with).
    pub fn from_env() -> Option<Self> {
        use std::io::IsTerminal;
        let browser = std::env::var("BROWSER")
            .ok()
            .filter(|b| !b.trim().is_empty());
        (browser.is_some() || std::io::stderr().is_terminal()).then_some(Self { browser })
    }

    /// Shows `url`, to authorize to server `name`.
    fn show(&self, name: &str, url: &str) {
        eprintln!(
            "codemode: mcp server \"{name}\" needs authorization; open this address in a browser:\n  {url}\ncodemode: waiting for the browser to come back (at most {})",
            humantime::format_duration(login::LOGIN_TIMEOUT)
        );
        let Some(browser) = &self.browser else {
            return;
        };
        // `$BROWSER` may list several commands (`a:b`): the first is used; `%s` stands for the
        // address, else it is the last argument.
        let first = browser.split(':').next().unwrap_or_default();
        let Some(mut words) = shlex::split(first).filter(|w| !w.is_empty()) else {
            eprintln!("codemode: $BROWSER ({first:?}) is not a command; open the address yourself");
            return;
        };
        if words.iter().any(|w| w.contains("%s")) {
            for word in &mut words {
                *word = word.replace("%s", url);
            }
        } else {
            words.push(url.to_owned());
        }
        let program = words.remove(0);
        match tokio::process::Command::new(&program)
            .args(&words)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .env_remove(crate::server::TOKEN_ENV)
            .env_remove(codemode_durable::KEY_ENV)
            .spawn()
        {
            Ok(mut child) => {
                tokio::spawn(async move {
                    let _ = child.wait().await;
                });
            }
            Err(e) => eprintln!("codemode: cannot start $BROWSER ({program}): {e}"),
        }
    }
}

/// How codemode authorizes to upstream servers: where the tokens a person granted are kept,
/// who can grant one now, and the configuration to name in `codemode auth login`.
#[derive(Clone, Default)]
pub struct Authorization {
    credentials: Option<Credentials>,
    person: Option<Arc<Person>>,
    config: Option<PathBuf>,
    /// Held while the person authorizes: one address at a time, whichever servers ask.
    asking: Arc<tokio::sync::Mutex<()>>,
}

impl Authorization {
    /// Tokens kept in `credentials`; `person`, if any, asked to authorize where none is kept
    /// or a wider one is needed; `config`, the file that names the servers, for messages.
    pub fn new(
        credentials: Option<Credentials>,
        person: Option<Person>,
        config: Option<PathBuf>,
    ) -> Self {
        Self {
            credentials,
            person: person.map(Arc::new),
            config,
            asking: Arc::default(),
        }
    }

    /// Has the person authorize (`login`), after any authorization under way for another
    /// server.
    pub(crate) async fn ask(
        &self,
        person: &Person,
        login: Login<'_>,
    ) -> Result<Vec<String>, String> {
        let _one = self.asking.lock().await;
        authorize(login, person).await
    }

    /// The command that authorizes to server `name`.
    pub fn login_command(&self, name: &str) -> String {
        match &self.config {
            Some(config) => format!("codemode auth login {name} --config {}", config.display()),
            None => format!("codemode auth login {name} --config FILE"),
        }
    }

    pub(crate) fn store(&self, name: &str, url: &str) -> Option<SealedStore> {
        self.credentials.as_ref().map(|credentials| SealedStore {
            credentials: credentials.clone(),
            name: name.to_owned(),
            url: url.to_owned(),
        })
    }

    pub(crate) fn person(&self) -> Option<&Person> {
        self.person.as_deref()
    }
}

/// A manager for the server at `url`, its tokens read from `store` (if it has any).
pub(crate) async fn manager(
    url: &str,
    store: Option<SealedStore>,
) -> Result<AuthorizationManager, String> {
    let mut manager = AuthorizationManager::new(url)
        .await
        .map_err(|e| format!("{url}: {e}"))?;
    if let Some(store) = store {
        let kept = store.document().await?.is_some();
        manager.set_credential_store(store);
        if kept {
            manager
                .initialize_from_store()
                .await
                .map_err(|e| format!("the kept authorization cannot be used: {e}"))?;
        }
    }
    Ok(manager)
}

/// The address kept with server `name`'s authorization, if one is kept.
pub async fn kept_url(credentials: &Credentials, name: &str) -> Result<Option<String>, String> {
    Ok(credentials
        .read(name)
        .await?
        .and_then(|document| document["url"].as_str().map(str::to_owned)))
}

/// What `codemode auth login` did.
#[derive(Debug)]
pub enum LoggedIn {
    /// A person authorized; the scopes granted.
    Authorized(Vec<String>),
    /// The server needs no authorization of a person: its grant makes a token at each
    /// connection (one was made now, to check the settings).
    WithoutAPerson(Grant),
}

/// Authorizes to `spec`'s server now (`codemode auth login`): with `person` for the
/// authorization-code grant, asking for `scopes` besides those the server names, the tokens
/// kept in `credentials`; the grants without a person are tried once.
pub async fn login(
    spec: &UpstreamSpec,
    credentials: Credentials,
    person: &Person,
    scopes: Vec<String>,
) -> Result<LoggedIn, String> {
    let name = spec.name.as_str();
    let Transport::Url { url, oauth, .. } = &spec.transport else {
        return Err(format!(
            "mcp server \"{name}\" is a command codemode starts: only a server at a URL is authorized to"
        ));
    };
    let settings = oauth.as_deref().cloned().unwrap_or_default();
    if settings.grant != Grant::AuthorizationCode {
        token_without_a_person(url, &settings).await?;
        return Ok(LoggedIn::WithoutAPerson(settings.grant));
    }
    let challenge = challenge_of(url).await;
    let store = SealedStore {
        credentials,
        name: name.to_owned(),
        url: url.clone(),
    };
    let login = Login {
        name,
        url,
        settings: &settings,
        store,
        challenge: challenge.as_deref(),
        scopes,
    };
    authorize(login, person).await.map(LoggedIn::Authorized)
}

/// The `WWW-Authenticate` challenge the server at `url` answers an unauthorized
/// `initialize` with, if it does: the scope it names is the one asked for.
async fn challenge_of(url: &str) -> Option<String> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(std::time::Duration::from_secs(30))
        .build()
        .ok()?;
    let initialize = serde_json::json!({
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {
            "protocolVersion": rmcp::model::ProtocolVersion::LATEST_WITH_INITIALIZE,
            "capabilities": {},
            "clientInfo": {"name": "codemode", "version": env!("CARGO_PKG_VERSION")},
        },
    });
    let response = http
        .post(url)
        .header("accept", "application/json, text/event-stream")
        .header("content-type", "application/json")
        .body(initialize.to_string())
        .send()
        .await
        .ok()?;
    let status = response.status().as_u16();
    if status != 401 && status != 403 {
        return None;
    }
    response
        .headers()
        .get(http::header::WWW_AUTHENTICATE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}
