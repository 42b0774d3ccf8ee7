//! `codemode auth`: authorize to the upstream servers of a configuration that need OAuth
//! (`login`), see what is kept (`list`), and forget it (`logout`). Tokens are kept sealed in
//! the state store (`--state DIR|URL`, else `CODEMODE_STATE_DIR`, else
//! `$XDG_STATE_HOME/codemode`, else `~/.local/state/codemode`), with `CODEMODE_STATE_KEY` or
//! the directory's key; none is ever printed.

use std::path::PathBuf;

use clap::{Args, Subcommand};
use codemode_mcp::upstream::oauth::{self, Credentials, LoggedIn, Person};
use codemode_mcp::UpstreamSpec;
use serde_json::Value;

use super::{EXIT_OK, EXIT_USAGE};

#[derive(Args)]
pub struct AuthArgs {
    #[command(subcommand)]
    command: AuthCommand,
    /// Where authorizations are kept: a state directory, or a store the replicas of
    /// `codemode mcp --stateless` share (s3://bucket/prefix, with $CODEMODE_STATE_KEY), as
    /// for `--state` of `run` and `mcp`. Default: $CODEMODE_STATE_DIR, else
    /// $XDG_STATE_HOME/codemode, else ~/.local/state/codemode.
    #[arg(long, global = true, value_name = "DIR|URL")]
    state: Option<PathBuf>,
}

#[derive(Subcommand)]
enum AuthCommand {
    /// Authorize to server NAME of a configuration once: prints the authorization address
    /// (opened with $BROWSER when set) and waits for the browser to come back to a loopback
    /// port; the tokens are kept sealed and refreshed by the runs that use them.
    Login {
        /// The server, as its configuration names it.
        name: String,
        /// The `{"mcpServers": …}` file that names it; without it, a server authorized to
        /// before is authorized to again at the address kept for it.
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
        /// Scopes to ask for besides those the server names (space-separated).
        #[arg(long)]
        scope: Option<String>,
    },
    /// List the servers with an authorization kept: their address, scopes and expiry.
    List,
    /// Forget the authorization kept for server NAME.
    Logout {
        /// The server.
        name: String,
    },
}

pub async fn auth(args: AuthArgs) -> u8 {
    let credentials = match super::session::open_credentials(args.state.as_deref()) {
        Ok(credentials) => credentials,
        Err(e) => {
            eprintln!("codemode auth: {e}");
            return EXIT_USAGE;
        }
    };
    let outcome = match args.command {
        AuthCommand::Login {
            name,
            config,
            scope,
        } => login(credentials, &name, config.as_deref(), scope.as_deref()).await,
        AuthCommand::List => list(&credentials).await,
        AuthCommand::Logout { name } => logout(&credentials, &name).await,
    };
    match outcome {
        Ok(()) => EXIT_OK,
        Err(message) => {
            eprintln!("{message}");
            EXIT_USAGE
        }
    }
}

async fn login(
    credentials: Credentials,
    name: &str,
    config: Option<&std::path::Path>,
    scope: Option<&str>,
) -> Result<(), String> {
    let spec = match config {
        Some(config) => configured(name, config)?,
        None => {
            let url = oauth::kept_url(&credentials, name)
                .await
                .map_err(|e| format!("codemode auth: {e}"))?;
            let url = url.ok_or_else(|| {
                format!("codemode auth: no authorization is kept for mcp server \"{name}\": name the configuration that has it with --config FILE")
            })?;
            UpstreamSpec::at_url(name, &url).map_err(|e| format!("codemode auth: {e}"))?
        }
    };
    let spec = &spec;
    let person = Person::new(
        std::env::var("BROWSER")
            .ok()
            .filter(|b| !b.trim().is_empty()),
    );
    let scopes = scope
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    let kept_in = credentials.describe();
    match oauth::login(spec, credentials, &person, scopes)
        .await
        .map_err(|e| format!("codemode auth: {e}"))?
    {
        LoggedIn::Authorized(scopes) => {
            let scopes = if scopes.is_empty() {
                "no scope named".to_owned()
            } else {
                format!("scopes: {}", scopes.join(" "))
            };
            println!("codemode: authorized to mcp server \"{name}\" ({scopes}); kept sealed in {kept_in}");
        }
        LoggedIn::WithoutAPerson(grant) => println!(
            "codemode: mcp server \"{name}\" uses the {grant:?} grant, which needs no person: a token was obtained now, and each connection obtains its own; nothing is kept"
        ),
    }
    Ok(())
}

/// Server `name` of the configuration file `config`.
fn configured(name: &str, config: &std::path::Path) -> Result<UpstreamSpec, String> {
    let text = std::fs::read_to_string(config).map_err(|e| {
        format!(
            "codemode auth: cannot read --config {}: {e}",
            config.display()
        )
    })?;
    let specs = UpstreamSpec::from_config(&text)
        .map_err(|e| format!("codemode auth: --config {}: {e}", config.display()))?;
    let names: Vec<String> = specs.iter().map(|s| s.name.clone()).collect();
    specs
        .into_iter()
        .find(|spec| spec.name == name)
        .ok_or_else(|| {
            format!(
                "codemode auth: {} names no mcp server \"{name}\" (it names: {})",
                config.display(),
                names.join(", ")
            )
        })
}

async fn list(credentials: &Credentials) -> Result<(), String> {
    let names = credentials
        .names()
        .await
        .map_err(|e| format!("codemode auth: {e}"))?;
    if names.is_empty() {
        println!(
            "codemode: no authorization kept (in {})",
            credentials.describe()
        );
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    for name in names {
        match credentials.read(&name).await {
            Ok(Some(document)) => println!("{name}\t{}", describe(&document, now)),
            Ok(None) => {}
            Err(e) => println!("{name}\tunreadable: {e}"),
        }
    }
    Ok(())
}

/// A kept authorization's address, scopes and expiry: never its tokens.
fn describe(document: &Value, now: u64) -> String {
    let credentials = &document["credentials"];
    let url = document["url"].as_str().unwrap_or("?");
    let scopes: Vec<&str> = credentials["granted_scopes"]
        .as_array()
        .map(|s| s.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let token = &credentials["token_response"];
    let refreshable = token["refresh_token"].is_string();
    let expiry = match (
        credentials["token_received_at"].as_u64(),
        token["expires_in"].as_u64(),
    ) {
        (Some(at), Some(lasts)) if at + lasts > now => format!(
            "expires in {}",
            humantime::format_duration(std::time::Duration::from_secs(at + lasts - now))
        ),
        (Some(_), Some(_)) => "expired".to_owned(),
        _ => "no expiry given".to_owned(),
    };
    format!(
        "{url}\tscopes: {}\t{expiry}{}",
        if scopes.is_empty() {
            "-".to_owned()
        } else {
            scopes.join(" ")
        },
        if refreshable { ", refreshable" } else { "" }
    )
}

async fn logout(credentials: &Credentials, name: &str) -> Result<(), String> {
    if credentials
        .remove(name)
        .await
        .map_err(|e| format!("codemode auth: {e}"))?
    {
        println!("codemode: forgot the authorization of mcp server \"{name}\"");
        Ok(())
    } else {
        Err(format!(
            "codemode auth: no authorization is kept for mcp server \"{name}\""
        ))
    }
}
