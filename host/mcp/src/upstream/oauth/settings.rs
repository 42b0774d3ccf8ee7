//! An upstream's `"oauth": {…}` entry: how codemode authorizes to it, with the names the MCP
//! conformance suite's own client uses. Any value may be `${VAR}`, read from the environment
//! when the configuration is read, so that secrets need not be written in the file.

use serde_json::Value;

use super::super::spec::UpstreamError;

/// How a token is obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Grant {
    /// A person authorizes in a browser (`codemode auth login`), PKCE and all.
    #[default]
    AuthorizationCode,
    /// The client's own credentials (a secret or a signed key), no person.
    ClientCredentials,
    /// Cross-app access: an identity provider's ID token exchanged for an ID-JAG, then for a
    /// token (`urn:ietf:params:oauth:grant-type:jwt-bearer`).
    JwtBearer,
}

/// An upstream's OAuth settings; secrets never appear in its `Debug`.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct OAuthSettings {
    /// The grant (`grant_type`).
    pub grant: Grant,
    /// A client registered beforehand with the authorization server.
    pub client_id: Option<String>,
    /// Its secret.
    pub client_secret: Option<String>,
    /// Its private key (PEM), for `private_key_jwt`.
    pub private_key_pem: Option<String>,
    /// The key's algorithm (`RS256`, `RS384`, `RS512`, `ES256`, `ES384`).
    pub signing_algorithm: Option<String>,
    /// An HTTPS URL where codemode's client metadata document is published (a Client ID
    /// Metadata Document), used where the authorization server accepts one.
    pub client_metadata_url: Option<String>,
    /// The scopes to ask for, space-separated; else those the server's challenge or
    /// metadata name.
    pub scope: Option<String>,
    /// The loopback redirect URI a registered client must use (`http://127.0.0.1:PORT/…` or
    /// `http://localhost:PORT/…`); else a free port of 127.0.0.1.
    pub redirect_uri: Option<String>,
    /// Cross-app access: the identity provider's client id, secret, ID token, issuer and token
    /// endpoint.
    pub idp_client_id: Option<String>,
    /// See `idp_client_id`.
    pub idp_client_secret: Option<String>,
    /// See `idp_client_id`.
    pub idp_id_token: Option<String>,
    /// See `idp_client_id`.
    pub idp_issuer: Option<String>,
    /// See `idp_client_id`.
    pub idp_token_endpoint: Option<String>,
}

impl std::fmt::Debug for OAuthSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let hidden = |secret: &Option<String>| secret.as_ref().map(|_| "[hidden]");
        f.debug_struct("OAuthSettings")
            .field("grant", &self.grant)
            .field("client_id", &self.client_id)
            .field("client_secret", &hidden(&self.client_secret))
            .field("private_key_pem", &hidden(&self.private_key_pem))
            .field("signing_algorithm", &self.signing_algorithm)
            .field("client_metadata_url", &self.client_metadata_url)
            .field("scope", &self.scope)
            .field("redirect_uri", &self.redirect_uri)
            .field("idp_client_id", &self.idp_client_id)
            .field("idp_client_secret", &hidden(&self.idp_client_secret))
            .field("idp_id_token", &hidden(&self.idp_id_token))
            .field("idp_issuer", &self.idp_issuer)
            .field("idp_token_endpoint", &self.idp_token_endpoint)
            .finish()
    }
}

const GRANT_TYPE_JWT_BEARER: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";

impl OAuthSettings {
    /// The scopes asked for, if the entry names them.
    pub fn scopes(&self) -> Vec<String> {
        self.scope
            .as_deref()
            .unwrap_or_default()
            .split_whitespace()
            .map(str::to_owned)
            .collect()
    }

    /// Reads server `name`'s `oauth` entry, each value's `${VAR}`s replaced by `lookup`.
    pub(in crate::upstream) fn parse(
        name: &str,
        entry: &Value,
        lookup: &dyn Fn(&str, &str) -> Result<String, UpstreamError>,
    ) -> Result<Self, UpstreamError> {
        let refused = |key: &str, problem: String| UpstreamError::Config {
            at: format!("mcpServers.{name}.oauth{}: ", key),
            problem,
        };
        let Some(fields) = entry.as_object() else {
            return Err(refused("", "must be an object".into()));
        };
        let mut settings = Self::default();
        for (key, value) in fields {
            let Some(text) = value.as_str() else {
                return Err(refused(&format!(".{key}"), "must be a string".into()));
            };
            let text = lookup(key, text)?;
            let slot = match key.as_str() {
                "grant_type" => {
                    settings.grant = match text.as_str() {
                        "authorization_code" => Grant::AuthorizationCode,
                        "client_credentials" => Grant::ClientCredentials,
                        GRANT_TYPE_JWT_BEARER => Grant::JwtBearer,
                        other => {
                            return Err(refused(
                                ".grant_type",
                                format!("{other:?} is none of \"authorization_code\", \"client_credentials\", \"{GRANT_TYPE_JWT_BEARER}\""),
                            ))
                        }
                    };
                    continue;
                }
                "client_id" => &mut settings.client_id,
                "client_secret" => &mut settings.client_secret,
                "private_key_pem" => &mut settings.private_key_pem,
                "signing_algorithm" => {
                    if !["RS256", "RS384", "RS512", "ES256", "ES384"].contains(&text.as_str()) {
                        return Err(refused(
                            ".signing_algorithm",
                            format!("{text:?} is none of RS256, RS384, RS512, ES256, ES384"),
                        ));
                    }
                    &mut settings.signing_algorithm
                }
                "client_metadata_url" => {
                    if !text.starts_with("https://") {
                        return Err(refused(
                            ".client_metadata_url",
                            "must be an https:// URL (where the client metadata document is published)".into(),
                        ));
                    }
                    &mut settings.client_metadata_url
                }
                "scope" => &mut settings.scope,
                "redirect_uri" => {
                    if super::login::loopback_port(&text).is_none() {
                        return Err(refused(
                            ".redirect_uri",
                            "must be http://127.0.0.1:PORT/… or http://localhost:PORT/… (codemode receives the redirect itself)".into(),
                        ));
                    }
                    &mut settings.redirect_uri
                }
                "idp_client_id" => &mut settings.idp_client_id,
                "idp_client_secret" => &mut settings.idp_client_secret,
                "idp_id_token" => &mut settings.idp_id_token,
                "idp_issuer" => &mut settings.idp_issuer,
                "idp_token_endpoint" => &mut settings.idp_token_endpoint,
                other => {
                    return Err(refused(
                        &format!(".{other}"),
                        "is not an oauth setting (client_id, client_secret, private_key_pem, signing_algorithm, grant_type, client_metadata_url, scope, redirect_uri, idp_client_id, idp_client_secret, idp_id_token, idp_issuer, idp_token_endpoint)".into(),
                    ))
                }
            };
            *slot = Some(text);
        }
        let missing = |what: &str| refused("", format!("grant_type {what}"));
        match settings.grant {
            Grant::AuthorizationCode => {
                if settings.client_secret.is_some() && settings.client_id.is_none() {
                    return Err(refused(
                        ".client_secret",
                        "a secret needs the client_id it belongs to".into(),
                    ));
                }
            }
            Grant::ClientCredentials => {
                if settings.client_id.is_none()
                    || (settings.client_secret.is_none() && settings.private_key_pem.is_none())
                {
                    return Err(missing(
                        "client_credentials needs client_id and client_secret or private_key_pem",
                    ));
                }
            }
            Grant::JwtBearer => {
                let needed = [
                    &settings.client_id,
                    &settings.idp_client_id,
                    &settings.idp_id_token,
                    &settings.idp_issuer,
                    &settings.idp_token_endpoint,
                ];
                if needed.iter().any(|v| v.is_none()) {
                    return Err(missing(
                        "jwt-bearer (cross-app access) needs client_id, idp_client_id, idp_id_token, idp_issuer and idp_token_endpoint",
                    ));
                }
            }
        }
        Ok(settings)
    }
}
