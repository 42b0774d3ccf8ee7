//! The grants without a person, made at each connection: client credentials (a secret, or a
//! private key signing a JWT assertion) and cross-app access (an identity provider's ID token
//! exchanged for an ID-JAG, redeemed for a token with the jwt-bearer grant).

use oauth2::ClientSecret;
use rmcp::transport::auth::enterprise::{
    EmaAuthorizationServer, EmaClientAuthentication, EmaExchangeRequest,
};
use rmcp::transport::auth::{
    default_oauth_http_client, AuthorizationManager, ClientCredentialsConfig, JwtSigningAlgorithm,
    OAuthState,
};

use super::settings::{Grant, OAuthSettings};

/// What a connection authorizes with.
pub(crate) enum Token {
    /// A manager holding the token (and what renews it).
    Manager(Box<AuthorizationManager>),
    /// A bare access token.
    Bearer(String),
}

fn algorithm(name: Option<&str>) -> JwtSigningAlgorithm {
    match name {
        Some("RS256") => JwtSigningAlgorithm::RS256,
        Some("RS384") => JwtSigningAlgorithm::RS384,
        Some("RS512") => JwtSigningAlgorithm::RS512,
        Some("ES384") => JwtSigningAlgorithm::ES384,
        // The settings accept these five names only; ES256 is the default.
        _ => JwtSigningAlgorithm::ES256,
    }
}

/// The token of a grant without a person; `None` for the authorization-code grant.
pub(crate) async fn token_without_a_person(
    url: &str,
    settings: &OAuthSettings,
) -> Result<Option<Token>, String> {
    if settings.grant == Grant::AuthorizationCode {
        return Ok(None);
    }
    // rmcp's client-credentials exchange holds a value that is not `Send` across an await: it
    // runs on a runtime of its own, on a blocking thread.
    let (url, settings) = (url.to_owned(), settings.clone());
    tokio::task::spawn_blocking(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start the token exchange: {e}"))?;
        runtime.block_on(grant(&url, &settings))
    })
    .await
    .map_err(|e| format!("the token exchange failed: {e}"))?
}

async fn grant(url: &str, settings: &OAuthSettings) -> Result<Option<Token>, String> {
    let need = |value: &Option<String>, what: &str| {
        value
            .clone()
            .ok_or_else(|| format!("oauth.{what} is not set"))
    };
    match settings.grant {
        Grant::AuthorizationCode => Ok(None),
        Grant::ClientCredentials => {
            let client_id = need(&settings.client_id, "client_id")?;
            let config = match &settings.private_key_pem {
                Some(pem) => ClientCredentialsConfig::PrivateKeyJwt {
                    client_id,
                    signing_key: pem.as_bytes().to_vec(),
                    signing_algorithm: algorithm(settings.signing_algorithm.as_deref()),
                    token_endpoint_audience: None,
                    scopes: settings.scopes(),
                    resource: Some(url.to_owned()),
                },
                None => ClientCredentialsConfig::ClientSecret {
                    client_id,
                    client_secret: need(&settings.client_secret, "client_secret")?,
                    scopes: settings.scopes(),
                    resource: Some(url.to_owned()),
                },
            };
            let mut state = OAuthState::Unauthorized(super::manager(url, None).await?);
            state
                .authenticate_client_credentials(config)
                .await
                .map_err(|e| format!("the client credentials grant failed: {e}"))?;
            state
                .into_authorization_manager()
                .map(|manager| Some(Token::Manager(Box::new(manager))))
                .ok_or_else(|| "the client credentials grant did not complete".to_owned())
        }
        Grant::JwtBearer => {
            let manager = super::manager(url, None).await?;
            let metadata = manager
                .resolve_metadata()
                .await
                .map_err(|e| format!("cannot discover the authorization server: {e}"))?
                .metadata;
            let issuer = metadata
                .issuer
                .clone()
                .ok_or("the authorization server's metadata names no issuer")?;
            let secret = |s: &Option<String>| match s {
                Some(secret) => {
                    EmaClientAuthentication::ClientSecretBasic(ClientSecret::new(secret.clone()))
                }
                None => EmaClientAuthentication::None,
            };
            let idp = EmaAuthorizationServer::new(
                need(&settings.idp_issuer, "idp_issuer")?,
                need(&settings.idp_token_endpoint, "idp_token_endpoint")?,
                need(&settings.idp_client_id, "idp_client_id")?,
            )
            .with_client_authentication(secret(&settings.idp_client_secret));
            let resource_server = EmaAuthorizationServer::new(
                issuer,
                metadata.token_endpoint.clone(),
                need(&settings.client_id, "client_id")?,
            )
            .with_client_authentication(secret(&settings.client_secret));
            let id_token = need(&settings.idp_id_token, "idp_id_token")?;
            let http = default_oauth_http_client().map_err(|e| e.to_string())?;
            let token = EmaExchangeRequest::new_with_id_token(idp, resource_server, url, &id_token)
                .with_scopes(settings.scopes())
                .exchange(&http, &http)
                .await
                .map_err(|e| format!("cross-app access failed: {e}"))?;
            Ok(Some(Token::Bearer(token.access_token.secret().clone())))
        }
    }
}
