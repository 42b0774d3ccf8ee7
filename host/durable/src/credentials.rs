//! Credentials codemode keeps for the servers it connects to (an upstream MCP server's OAuth
//! tokens): one sealed document per server in `<state dir>/credentials/`, under a key derived
//! from the state key for credentials alone, with the server's name as associated data. The
//! file is the user's alone (`0600` in a `0700` directory), is written whole under a private
//! name and renamed into place, and says nothing to whoever reads it without the key: not the
//! token, not the server's URL, not the scopes.

use std::io::{Read, Write};
use std::path::PathBuf;

use serde_json::Value;

use super::key::Key;
use super::private::{self, Access, PrivateDir};
use super::{sealed, DurabilityError};

/// What the credentials' key is derived for.
const PURPOSE: &[u8] = b"codemode upstream credentials v1";
/// The directory they are kept in, under the state directory.
const DIR: &str = "credentials";
/// The largest credentials file read: tokens and metadata are a few kilobytes.
const MAX_BYTES: u64 = 1 << 20;

/// The credentials kept in one state directory.
#[derive(Clone)]
pub struct Credentials {
    dir: PathBuf,
    key: Key,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}

impl Credentials {
    /// The credentials of the state directory `dir` (created `0700` when missing), sealed with
    /// `CODEMODE_STATE_KEY` or with the directory's key file, as paused runs are.
    pub fn local(dir: impl Into<PathBuf>) -> Result<Self, DurabilityError> {
        let dir = dir.into();
        let key = Key::load(Some(&dir))?;
        Ok(Self { dir, key })
    }

    /// Where they are kept.
    pub fn dir(&self) -> PathBuf {
        self.dir.join(DIR)
    }

    fn open(&self, create: bool) -> Result<Option<PrivateDir>, String> {
        let Some(state) = PrivateDir::open(&self.dir, create)? else {
            return Ok(None);
        };
        state.sub(DIR, create)
    }

    /// Keeps `document` as `name`'s credentials, replacing any.
    pub fn keep(&self, name: &str, document: &Value) -> Result<(), String> {
        let dir = self
            .open(true)?
            .ok_or_else(|| format!("{} vanished", self.dir().display()))?;
        let json = codemode_runtime::json::to_string(document);
        let sealed = sealed::seal(&self.key.derive(PURPOSE), name, json.as_bytes())
            .map_err(|e| e.to_string())?;
        let tmp = format!(".{name}.{}.tmp", std::process::id());
        let _ = dir.remove(&tmp);
        let written = dir
            .create_new(&tmp, 0o600)
            .and_then(|mut file| file.write_all(&sealed).and_then(|()| file.sync_all()))
            .and_then(|()| dir.rename(&tmp, name));
        if written.is_err() {
            let _ = dir.remove(&tmp);
        }
        written.map_err(|e| format!("cannot write {}: {e}", dir.path(name).display()))?;
        let _ = dir.sync();
        Ok(())
    }

    /// `name`'s credentials, if kept; refused unless they open under the key.
    pub fn read(&self, name: &str) -> Result<Option<Value>, String> {
        let Some(dir) = self.open(false)? else {
            return Ok(None);
        };
        let file = match dir.open_read(name) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => {
                return Err(format!(
                    "cannot read {}: {}",
                    dir.path(name).display(),
                    private::why(&e)
                ))
            }
        };
        private::checked_file(&file, &dir, name, "a credentials file", Access::OwnerOnly)?;
        let mut bytes = Vec::new();
        file.take(MAX_BYTES)
            .read_to_end(&mut bytes)
            .map_err(|e| format!("cannot read {}: {e}", dir.path(name).display()))?;
        let json = sealed::open(&self.key.derive(PURPOSE), name, &bytes).map_err(|e| {
            format!(
                "{} does not open under the state key ({e}): log in again",
                dir.path(name).display()
            )
        })?;
        codemode_runtime::json::parse(&json)
            .map(Some)
            .map_err(|e| format!("{} is not JSON: {e}", dir.path(name).display()))
    }

    /// Forgets `name`'s credentials; whether there were any.
    pub fn remove(&self, name: &str) -> Result<bool, String> {
        let Some(dir) = self.open(false)? else {
            return Ok(false);
        };
        match dir.remove(name) {
            Ok(()) => {
                let _ = dir.sync();
                Ok(true)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(format!("cannot remove {}: {e}", dir.path(name).display())),
        }
    }

    /// The names of the servers with credentials kept, sorted.
    pub fn names(&self) -> Result<Vec<String>, String> {
        let Some(dir) = self.open(false)? else {
            return Ok(Vec::new());
        };
        let mut names: Vec<String> = dir
            .files()
            .map_err(|e| format!("cannot list {}: {e}", self.dir().display()))?
            .into_iter()
            .map(|listed| listed.name)
            .filter(|name| !name.starts_with('.'))
            .collect();
        names.sort_unstable();
        Ok(names)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_read_back_sealed_private_and_only_under_their_name() {
        let dir = std::env::temp_dir().join(format!("codemode-credentials-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let credentials = Credentials::local(&dir).unwrap();
        assert_eq!(credentials.read("gh").unwrap(), None);
        assert!(credentials.names().unwrap().is_empty());
        let document = serde_json::json!({"url": "https://mcp.example/", "token": "s3cret-token"});
        credentials.keep("gh", &document).unwrap();
        assert_eq!(credentials.read("gh").unwrap(), Some(document.clone()));
        assert_eq!(credentials.names().unwrap(), vec!["gh".to_owned()]);
        let file = credentials.dir().join("gh");
        let bytes = std::fs::read(&file).unwrap();
        let text = String::from_utf8_lossy(&bytes);
        for hidden in ["s3cret", "mcp.example", "token"] {
            assert!(!text.contains(hidden), "{hidden} in {text}");
        }
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        // Moved under another server's name, it does not open.
        std::fs::copy(&file, credentials.dir().join("other")).unwrap();
        std::fs::set_permissions(
            credentials.dir().join("other"),
            std::fs::Permissions::from_mode(0o600),
        )
        .unwrap();
        assert!(credentials
            .read("other")
            .unwrap_err()
            .contains("log in again"));
        assert!(credentials.remove("gh").unwrap());
        assert!(!credentials.remove("gh").unwrap());
        assert_eq!(credentials.read("gh").unwrap(), None);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
