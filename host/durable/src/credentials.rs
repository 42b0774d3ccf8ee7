//! Credentials codemode keeps for the servers it connects to (an upstream MCP server's OAuth
//! tokens): one sealed document per server in the state store (`credentials/` of the state
//! directory, or of a shared store every replica reads), under a key derived from the state
//! key for credentials alone, with the server's name as associated data. Credentials are never
//! swept. Whoever reads the store without the key learns a document's size and nothing else:
//! not the token, not the server's URL, not the scopes. In a directory, the file is the user's
//! alone (`0600` in a `0700` directory) and is written whole, then renamed into place.

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::Value;

use super::key::Key;
use super::store::{LocalStore, StateStore};
use super::{sealed, DurabilityError};

/// What the credentials' key is derived for.
const PURPOSE: &[u8] = b"codemode upstream credentials v1";

/// The credentials kept in one state store.
#[derive(Clone)]
pub struct Credentials {
    store: Arc<dyn StateStore>,
    key: Key,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("store", &self.store.describe())
            .finish_non_exhaustive()
    }
}

impl Credentials {
    /// The credentials of the state directory `dir` (created `0700` when missing), sealed with
    /// `CODEMODE_STATE_KEY` or with the directory's key file, as paused runs are.
    pub fn local(dir: impl Into<PathBuf>) -> Result<Self, DurabilityError> {
        let dir = dir.into();
        let store = LocalStore::new(&dir);
        store.check()?;
        let key = Key::load(Some(&dir))?;
        Ok(Self {
            store: Arc::new(store),
            key,
        })
    }

    /// The credentials of `store`, sealed with `key`.
    pub(crate) fn of(store: Arc<dyn StateStore>, key: Key) -> Self {
        Self { store, key }
    }

    /// Where they are kept, for messages.
    pub fn describe(&self) -> String {
        format!("{} (credentials)", self.store.describe())
    }

    /// Keeps `document` as `name`'s credentials, replacing any.
    pub async fn keep(&self, name: &str, document: &Value) -> Result<(), String> {
        let json = codemode_runtime::json::to_string(document);
        let sealed = sealed::seal(&self.key.derive(PURPOSE), name, json.as_bytes())
            .map_err(|e| e.to_string())?;
        self.store
            .put_credentials(name, sealed)
            .await
            .map_err(|e| e.to_string())
    }

    /// `name`'s credentials, if kept; refused unless they open under the key.
    pub async fn read(&self, name: &str) -> Result<Option<Value>, String> {
        let Some(bytes) = self
            .store
            .get_credentials(name)
            .await
            .map_err(|e| e.to_string())?
        else {
            return Ok(None);
        };
        let json = sealed::open(&self.key.derive(PURPOSE), name, &bytes).map_err(|e| {
            format!(
                "the credentials of \"{name}\" in {} do not open under the state key ({e}): log in again",
                self.store.describe()
            )
        })?;
        codemode_runtime::json::parse(&json)
            .map(Some)
            .map_err(|e| format!("the credentials of \"{name}\" are not JSON: {e}"))
    }

    /// Forgets `name`'s credentials; whether there were any.
    pub async fn remove(&self, name: &str) -> Result<bool, String> {
        self.store
            .remove_credentials(name)
            .await
            .map_err(|e| e.to_string())
    }

    /// The names of the servers with credentials kept, sorted.
    pub async fn names(&self) -> Result<Vec<String>, String> {
        let mut names = self
            .store
            .credential_names()
            .await
            .map_err(|e| e.to_string())?;
        names.sort_unstable();
        Ok(names)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn credentials_read_back_sealed_private_and_only_under_their_name() {
        let dir = std::env::temp_dir().join(format!("codemode-credentials-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let credentials = Credentials::local(&dir).unwrap();
        assert_eq!(credentials.read("gh").await.unwrap(), None);
        assert!(credentials.names().await.unwrap().is_empty());
        let document = serde_json::json!({"url": "https://mcp.example/", "token": "s3cret-token"});
        credentials.keep("gh", &document).await.unwrap();
        assert_eq!(
            credentials.read("gh").await.unwrap(),
            Some(document.clone())
        );
        assert_eq!(credentials.names().await.unwrap(), vec!["gh".to_owned()]);
        let file = dir.join("credentials/gh");
        let bytes = std::fs::read(&file).unwrap();
        let text = String::from_utf8_lossy(&bytes);
        for hidden in ["s3cret", "mcp.example", "token"] {
            assert!(!text.contains(hidden), "{hidden} in {text}");
        }
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        // Moved under another server's name, it does not open.
        std::fs::copy(&file, dir.join("credentials/other")).unwrap();
        std::fs::set_permissions(
            dir.join("credentials/other"),
            std::fs::Permissions::from_mode(0o600),
        )
        .unwrap();
        assert!(credentials
            .read("other")
            .await
            .unwrap_err()
            .contains("log in again"));
        // Readable by others, it is refused.
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(credentials.read("gh").await.is_err());
        assert!(credentials.remove("gh").await.unwrap());
        assert!(!credentials.remove("gh").await.unwrap());
        assert_eq!(credentials.read("gh").await.unwrap(), None);
        // A name that could leave the directory is refused.
        assert!(credentials.read("../key").await.is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
