//! What names an upstream server: `--mcp NAME=COMMAND`, or an entry of an `mcpServers` file (a
//! command, or a URL with headers).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

/// How to reach one upstream server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpstreamSpec {
    /// The server's name: tools are registered as `mcp__<name>__<tool>`.
    pub name: String,
    /// How it is reached.
    pub transport: Transport,
}

/// How an upstream server is reached.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Transport {
    /// A program codemode starts, spoken to over its standard input and output; restarted,
    /// with backoff, when it exits.
    Command {
        /// The program to run: a name looked up in the absolute directories of `PATH`, or an
        /// absolute path (never one relative to the current directory, which is usually the
        /// workspace).
        command: String,
        /// Its arguments.
        args: Vec<String>,
        /// Extra environment variables.
        env: BTreeMap<String, String>,
        /// The absolute directory it starts in; `None`, a directory of codemode's own
        /// (`<cache dir>/upstream/<name>`), never the current one.
        cwd: Option<PathBuf>,
    },
    /// A server at a URL, over streamable HTTP.
    Url {
        /// `http://` or `https://`.
        url: String,
        /// Sent with every request, their `${VAR}`s already replaced from the environment.
        headers: BTreeMap<String, String>,
        /// How codemode authorizes to it with OAuth, when the entry says (without it, a
        /// server that asks for OAuth is still authorized to with the authorization-code
        /// grant and dynamic registration).
        oauth: Option<Box<super::oauth::OAuthSettings>>,
    },
}

/// Why an upstream server cannot be configured or started.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum UpstreamError {
    /// A server name outside `[A-Za-z0-9_-]+` (it becomes part of tool names).
    #[error("mcp server name {name:?} must be letters, digits, `_` or `-`")]
    Name {
        /// The name as given.
        name: String,
    },
    /// A `--mcp NAME=COMMAND` flag that does not parse.
    #[error("--mcp {flag}: {problem}")]
    Flag {
        /// The flag (or, once it parsed that far, the server's name).
        flag: String,
        /// What is wrong with it.
        problem: String,
    },
    /// A `{"mcpServers": …}` configuration that does not have that shape.
    #[error("{at}{problem}")]
    Config {
        /// Where (`mcpServers.NAME: `), empty for the whole file.
        at: String,
        /// What is wrong there.
        problem: String,
    },
    /// A header or `oauth` value names an environment variable that is not set.
    #[error("mcpServers.{name}.{field}: ${{{variable}}} is not set in codemode's environment")]
    MissingVariable {
        /// The server.
        name: String,
        /// The field: `headers.NAME` or `oauth.NAME`.
        field: String,
        /// The variable.
        variable: String,
    },
    /// The server's command could not be spawned.
    #[error("mcp server \"{name}\" could not start `{command}`: {source}")]
    Spawn {
        /// The server.
        name: String,
        /// Its command.
        command: String,
        /// Why it could not be spawned.
        #[source]
        source: std::sync::Arc<std::io::Error>,
    },
    /// The server needs an authorization codemode does not have, or a wider one.
    #[error("mcp server \"{name}\" {problem}: run `{command}`, then try again")]
    Unauthorized {
        /// The server.
        name: String,
        /// What it refused.
        problem: String,
        /// The command that authorizes to it.
        command: String,
        /// Its `WWW-Authenticate` challenge.
        challenge: String,
    },
    /// The server started but did not complete the handshake and list its tools.
    #[error("mcp server \"{name}\" did not start: {reason}{stderr_tail}")]
    Handshake {
        /// The server.
        name: String,
        /// What went wrong (its exit, a protocol error, no answer in time).
        reason: String,
        /// The last lines it wrote to stderr, as `; its stderr ended with: …`, or empty.
        stderr_tail: String,
    },
}

fn check_name(name: &str) -> Result<(), UpstreamError> {
    let ok = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if ok {
        Ok(())
    } else {
        Err(UpstreamError::Name {
            name: name.to_owned(),
        })
    }
}

fn flag_error(flag: &str, problem: impl Into<String>) -> UpstreamError {
    UpstreamError::Flag {
        flag: flag.to_owned(),
        problem: problem.into(),
    }
}

fn config_error(name: Option<&str>, problem: impl Into<String>) -> UpstreamError {
    UpstreamError::Config {
        at: name.map_or_else(String::new, |name| format!("mcpServers.{name}: ")),
        problem: problem.into(),
    }
}

impl UpstreamSpec {
    /// Parses `NAME=COMMAND`, the command split as a shell would (quotes respected, nothing
    /// expanded).
    pub fn from_flag(flag: &str) -> Result<Self, UpstreamError> {
        let Some((name, command)) = flag.split_once('=') else {
            return Err(flag_error(&format!("{flag:?}"), "expected NAME=COMMAND"));
        };
        check_name(name)?;
        let words = shlex::split(command)
            .ok_or_else(|| flag_error(name, format!("unbalanced quotes in {command:?}")))?;
        let mut words = words.into_iter();
        let Some(program) = words.next() else {
            return Err(flag_error(name, "the command is empty"));
        };
        if let Some(problem) = relative_program(&program) {
            return Err(flag_error(name, problem));
        }
        Ok(Self {
            name: name.to_owned(),
            transport: Transport::Command {
                command: program,
                args: words.collect(),
                env: BTreeMap::new(),
                cwd: None,
            },
        })
    }

    /// Reads the `{"mcpServers": {NAME: {command, args?, env?, cwd?} | {url, headers?, oauth?}}}`
    /// file MCP clients use. `cwd`, when given, must be an absolute directory. A header's or
    /// an `oauth` setting's `${VAR}` is replaced by the environment variable `VAR`
    /// (`"Authorization": "Bearer ${GITHUB_TOKEN}"`); one that is not set is an error.
    pub fn from_config(text: &str) -> Result<Vec<Self>, UpstreamError> {
        let config: Value =
            serde_json::from_str(text).map_err(|e| config_error(None, format!("not JSON: {e}")))?;
        let Some(servers) = config.get("mcpServers").and_then(Value::as_object) else {
            return Err(config_error(
                None,
                "expected an object with an \"mcpServers\" object",
            ));
        };
        let mut specs = Vec::new();
        for (name, entry) in servers {
            check_name(name)?;
            let field = |key: &str| entry.get(key);
            if let Some(url) = field("url") {
                specs.push(Self::remote(name, url, field("headers"), field("oauth"))?);
                continue;
            }
            let Some(command) = field("command").and_then(Value::as_str) else {
                return Err(config_error(
                    Some(name),
                    "\"command\" (a program to start) or \"url\" (a server to reach) must be a string",
                ));
            };
            let args = match field("args") {
                None => Vec::new(),
                Some(Value::Array(items)) => items
                    .iter()
                    .map(|a| a.as_str().map(str::to_owned))
                    .collect::<Option<Vec<_>>>()
                    .ok_or_else(|| config_error(Some(name), "\"args\" must be strings"))?,
                Some(_) => return Err(config_error(Some(name), "\"args\" must be an array")),
            };
            let env = match field("env") {
                None => BTreeMap::new(),
                Some(Value::Object(vars)) => vars
                    .iter()
                    .map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_owned())))
                    .collect::<Option<BTreeMap<_, _>>>()
                    .ok_or_else(|| config_error(Some(name), "\"env\" values must be strings"))?,
                Some(_) => return Err(config_error(Some(name), "\"env\" must be an object")),
            };
            if let Some(problem) = relative_program(command) {
                return Err(config_error(Some(name), format!("\"command\": {problem}")));
            }
            let cwd = match field("cwd") {
                None => None,
                Some(Value::String(dir)) if Path::new(dir).is_absolute() => {
                    Some(PathBuf::from(dir))
                }
                Some(_) => {
                    return Err(config_error(
                        Some(name),
                        "\"cwd\" must be an absolute directory",
                    ))
                }
            };
            specs.push(Self {
                name: name.clone(),
                transport: Transport::Command {
                    command: command.to_owned(),
                    args,
                    env,
                    cwd,
                },
            });
        }
        Ok(specs)
    }

    /// Server `name` at `url`, with no headers and OAuth as the server asks for it.
    pub fn at_url(name: &str, url: &str) -> Result<Self, UpstreamError> {
        check_name(name)?;
        Self::remote(name, &Value::String(url.to_owned()), None, None)
    }

    /// A `{url, headers?, oauth?}` entry.
    fn remote(
        name: &str,
        url: &Value,
        headers: Option<&Value>,
        oauth: Option<&Value>,
    ) -> Result<Self, UpstreamError> {
        let Some(url) = url.as_str() else {
            return Err(config_error(Some(name), "\"url\" must be a string"));
        };
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(config_error(
                Some(name),
                format!("\"url\" must start with http:// or https://, not {url:?}"),
            ));
        }
        let headers = match headers {
            None => BTreeMap::new(),
            Some(Value::Object(headers)) => {
                let mut expanded = BTreeMap::new();
                for (header, value) in headers {
                    let Some(value) = value.as_str() else {
                        return Err(config_error(
                            Some(name),
                            "\"headers\" values must be strings",
                        ));
                    };
                    let value = expand(value, |variable| {
                        std::env::var(variable).map_err(|_| UpstreamError::MissingVariable {
                            name: name.to_owned(),
                            field: format!("headers.{header}"),
                            variable: variable.to_owned(),
                        })
                    })?;
                    expanded.insert(header.clone(), value);
                }
                expanded
            }
            Some(_) => return Err(config_error(Some(name), "\"headers\" must be an object")),
        };
        let oauth = match oauth {
            None => None,
            Some(entry) => {
                let lookup = |key: &str, value: &str| {
                    expand(value, |variable| {
                        std::env::var(variable).map_err(|_| UpstreamError::MissingVariable {
                            name: name.to_owned(),
                            field: format!("oauth.{key}"),
                            variable: variable.to_owned(),
                        })
                    })
                };
                Some(Box::new(super::oauth::OAuthSettings::parse(
                    name, entry, &lookup,
                )?))
            }
        };
        Ok(Self {
            name: name.to_owned(),
            transport: Transport::Url {
                url: url.to_owned(),
                headers,
                oauth,
            },
        })
    }
}

/// Why `program` cannot name an upstream's program: a path relative to the current directory,
/// which is usually the workspace, where anything may have been planted.
fn relative_program(program: &str) -> Option<String> {
    (program.contains('/') && !Path::new(program).is_absolute()).then(|| {
        format!(
            "{program:?} is a relative path, and upstream servers never start from the current directory or the workspace: give an absolute path, or a program name found on PATH"
        )
    })
}

/// `text` with each `${VAR}` replaced by `lookup(VAR)`; a `$` not followed by `{NAME}` stays.
fn expand(
    text: &str,
    lookup: impl Fn(&str) -> Result<String, UpstreamError>,
) -> Result<String, UpstreamError> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("${") {
        out.push_str(&rest[..at]);
        let after = &rest[at + 2..];
        match after.find('}') {
            Some(end)
                if end > 0
                    && after[..end]
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'_') =>
            {
                out.push_str(&lookup(&after[..end])?);
                rest = &after[end + 1..];
            }
            _ => {
                out.push_str("${");
                rest = after;
            }
        }
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_header_names_environment_variables_and_a_missing_one_is_an_error() {
        let env = |name: &str| match name {
            "TOKEN" => Ok("s3cret".to_owned()),
            other => Err(UpstreamError::MissingVariable {
                name: "gh".into(),
                field: "headers.Authorization".into(),
                variable: other.to_owned(),
            }),
        };
        assert_eq!(expand("Bearer ${TOKEN}", env).unwrap(), "Bearer s3cret");
        assert_eq!(expand("${TOKEN}${TOKEN}", env).unwrap(), "s3crets3cret");
        assert_eq!(expand("$5 ${} ${a-b} $", env).unwrap(), "$5 ${} ${a-b} $");
        let missing = expand("x ${NOPE}", env).unwrap_err().to_string();
        assert_eq!(
            missing,
            "mcpServers.gh.headers.Authorization: ${NOPE} is not set in codemode's environment"
        );

        let config = r#"{"mcpServers": {"remote": {"url": "https://mcp.example.com/mcp", "headers": {"X-Plain": "v"}}, "local": {"command": "srv", "args": ["a"]}}}"#;
        let specs = UpstreamSpec::from_config(config).unwrap();
        let named = |name: &str| &specs.iter().find(|s| s.name == name).unwrap().transport;
        assert_eq!(
            named("remote"),
            &Transport::Url {
                url: "https://mcp.example.com/mcp".into(),
                headers: BTreeMap::from([("X-Plain".into(), "v".into())]),
                oauth: None,
            }
        );
        assert!(matches!(named("local"), Transport::Command { command, .. } if command == "srv"));
        for (bad, why) in [
            (
                r#"{"mcpServers": {"r": {"url": "ftp://x"}}}"#,
                "must start with http:// or https://",
            ),
            (
                r#"{"mcpServers": {"r": {"url": 1}}}"#,
                "\"url\" must be a string",
            ),
            (
                r#"{"mcpServers": {"r": {"url": "http://x", "headers": []}}}"#,
                "\"headers\" must be an object",
            ),
            (
                r#"{"mcpServers": {"r": {}}}"#,
                "\"command\" (a program to start) or \"url\"",
            ),
        ] {
            let refused = UpstreamSpec::from_config(bad).unwrap_err().to_string();
            assert!(refused.contains(why), "{refused}");
        }
    }

    #[test]
    fn a_program_is_a_name_or_an_absolute_path_and_cwd_is_absolute() {
        for flag in ["x=./server", "x=bin/server --stdio", "x=../x"] {
            let refused = UpstreamSpec::from_flag(flag).unwrap_err().to_string();
            assert!(refused.contains("is a relative path"), "{refused}");
        }
        for flag in ["x=server", "x=/opt/server", "x=npx -y ./pkg"] {
            assert!(UpstreamSpec::from_flag(flag).is_ok(), "{flag}");
        }
        let config = |entry: &str| format!(r#"{{"mcpServers": {{"x": {entry}}}}}"#);
        let refused = UpstreamSpec::from_config(&config(r#"{"command": "./server"}"#))
            .unwrap_err()
            .to_string();
        assert!(
            refused.starts_with("mcpServers.x: \"command\": \"./server\" is a relative path"),
            "{refused}"
        );
        for cwd in [r#""relative""#, "1"] {
            let entry = format!(r#"{{"command": "server", "cwd": {cwd}}}"#);
            let refused = UpstreamSpec::from_config(&config(&entry))
                .unwrap_err()
                .to_string();
            assert!(
                refused.contains("\"cwd\" must be an absolute directory"),
                "{refused}"
            );
        }
        let specs = UpstreamSpec::from_config(&config(r#"{"command": "server", "cwd": "/srv/x"}"#))
            .unwrap();
        assert!(matches!(
            &specs[0].transport,
            Transport::Command { cwd: Some(cwd), .. } if cwd == Path::new("/srv/x")
        ));
    }

    #[test]
    fn an_oauth_entry_reads_its_settings_secrets_from_the_environment_and_refuses_the_unknown() {
        // A variable every environment has: setting one would race the other tests' reads.
        let path = std::env::var("PATH").unwrap_or_default();
        assert!(!path.is_empty(), "cargo runs tests with a PATH");
        let entry = |oauth: &str| {
            format!(
                r#"{{"mcpServers": {{"r": {{"url": "https://mcp.example.com/mcp", "oauth": {oauth}}}}}}}"#
            )
        };
        let specs = UpstreamSpec::from_config(&entry(
            r#"{"grant_type": "client_credentials", "client_id": "c", "client_secret": "${PATH}", "scope": "a b"}"#,
        ))
        .unwrap();
        let Transport::Url {
            oauth: Some(oauth), ..
        } = &specs[0].transport
        else {
            panic!("{specs:?}");
        };
        assert_eq!(oauth.grant, super::super::oauth::Grant::ClientCredentials);
        assert_eq!(oauth.client_secret.as_deref(), Some(path.as_str()));
        assert_eq!(oauth.scopes(), ["a", "b"]);
        assert!(!format!("{oauth:?}").contains(&path));
        for (bad, why) in [
            (
                r#"{"client_secret": "${CODEMODE_TEST_UNSET_VARIABLE}"}"#,
                "mcpServers.r.oauth.client_secret: ${CODEMODE_TEST_UNSET_VARIABLE} is not set",
            ),
            (
                r#"{"grant_type": "password"}"#,
                "mcpServers.r.oauth.grant_type: \"password\" is none of",
            ),
            (
                r#"{"grant_type": "client_credentials"}"#,
                "needs client_id and client_secret or private_key_pem",
            ),
            (
                r#"{"client_metadata_url": "http://x/cimd.json"}"#,
                "must be an https:// URL",
            ),
            (
                r#"{"redirect_uri": "http://example.com:80/cb"}"#,
                "must be http://127.0.0.1:PORT",
            ),
            (r#"{"signing_algorithm": "HS256"}"#, "none of RS256"),
            (
                r#"{"clientId": "x"}"#,
                "mcpServers.r.oauth.clientId: is not an oauth setting",
            ),
            (r#"{"client_secret": "s"}"#, "needs the client_id"),
            (r#""x""#, "mcpServers.r.oauth: must be an object"),
        ] {
            let refused = UpstreamSpec::from_config(&entry(bad))
                .unwrap_err()
                .to_string();
            assert!(refused.contains(why), "{bad}: {refused}");
        }
    }
}
