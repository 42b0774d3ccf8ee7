//! An upstream's tokens, kept sealed in the state store (`codemode_durable::Credentials`)
//! under the server's name and bound to its URL: a token is never read back for another URL,
//! should the configuration's entry change.

use codemode_durable::Credentials;
use rmcp::transport::auth::{AuthError, CredentialStore, StoredCredentials};
use serde_json::{json, Value};

/// The sealed credentials of server `name` at `url`.
#[derive(Clone)]
pub(crate) struct SealedStore {
    pub(crate) credentials: Credentials,
    pub(crate) name: String,
    pub(crate) url: String,
}

fn store_error(e: String) -> AuthError {
    AuthError::CredentialStoreError(e)
}

impl SealedStore {
    /// The kept document, if it is this URL's.
    pub(crate) async fn document(&self) -> Result<Option<Value>, String> {
        let Some(document) = self.credentials.read(&self.name).await? else {
            return Ok(None);
        };
        if document.get("url").and_then(Value::as_str) != Some(self.url.as_str()) {
            return Ok(None);
        }
        Ok(Some(document))
    }

    /// The scopes the kept authorization was granted.
    pub(crate) async fn granted_scopes(&self) -> Vec<String> {
        let document = self.document().await.ok().flatten().unwrap_or_default();
        document["credentials"]["granted_scopes"]
            .as_array()
            .map(|scopes| {
                scopes
                    .iter()
                    .filter_map(|s| s.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    }
}

#[async_trait::async_trait]
impl CredentialStore for SealedStore {
    async fn load(&self) -> Result<Option<StoredCredentials>, AuthError> {
        let Some(document) = self.document().await.map_err(store_error)? else {
            return Ok(None);
        };
        let stored = document.get("credentials").cloned().unwrap_or(Value::Null);
        serde_json::from_value(stored)
            .map(Some)
            .map_err(|e| store_error(format!("kept credentials of \"{}\": {e}", self.name)))
    }

    async fn save(&self, credentials: StoredCredentials) -> Result<(), AuthError> {
        let credentials = serde_json::to_value(&credentials)
            .map_err(|e| store_error(format!("credentials as JSON: {e}")))?;
        let document = json!({"url": self.url, "credentials": credentials});
        self.credentials
            .keep(&self.name, &document)
            .await
            .map_err(store_error)
    }

    async fn clear(&self) -> Result<(), AuthError> {
        self.credentials
            .remove(&self.name)
            .await
            .map(drop)
            .map_err(store_error)
    }
}
