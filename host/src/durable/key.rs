//! The key that authenticates paused-run records.
//!
//! `CODEMODE_STATE_KEY` (at least 32 characters, shared by every process that resumes the
//! others' runs) wins; otherwise `<state dir>/key`, 32 random bytes created `0600` on first
//! use and refused when anyone but its owner can read it.

use std::path::Path;

/// The environment variable that carries the key.
pub const KEY_ENV: &str = "CODEMODE_STATE_KEY";
const MIN_ENV_KEY: usize = 32;
const FILE_KEY: usize = 32;

#[derive(Clone)]
pub struct Key(Vec<u8>);

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Key(..)")
    }
}

impl Key {
    pub fn bytes(&self) -> &[u8] {
        &self.0
    }

    pub fn from_bytes(bytes: Vec<u8>) -> Self {
        Self(bytes)
    }

    /// The environment's key, else the one kept in `dir` (refused when there is no `dir`).
    pub fn load(dir: Option<&Path>) -> Result<Self, String> {
        if let Some(key) = std::env::var_os(KEY_ENV) {
            let key = key.into_encoded_bytes();
            if key.len() < MIN_ENV_KEY {
                return Err(format!(
                    "{KEY_ENV} must be at least {MIN_ENV_KEY} characters (for example the output of `openssl rand -hex 32`)"
                ));
            }
            return Ok(Self(key));
        }
        match dir {
            Some(dir) => Self::from_file(&dir.join("key")),
            None => Err(format!(
                "no state key: set {KEY_ENV} (every process resuming these runs needs it)"
            )),
        }
    }

    fn from_file(path: &Path) -> Result<Self, String> {
        use std::io::Write;
        use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
        if let Some(dir) = path.parent() {
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        }
        let mut fresh = [0u8; FILE_KEY];
        getrandom::fill(&mut fresh).map_err(|e| format!("no randomness for a state key: {e}"))?;
        // Written whole under a private name, then linked into place: a process that finds
        // the key never sees it half-written, and of two first users one key wins.
        let tmp = path.with_extension(format!("{}.tmp", std::process::id()));
        let _ = std::fs::remove_file(&tmp);
        let written = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)
            .and_then(|mut file| file.write_all(&fresh).and_then(|()| file.sync_all()));
        let linked = written.and_then(|()| std::fs::hard_link(&tmp, path));
        let _ = std::fs::remove_file(&tmp);
        match linked {
            Ok(()) => return Ok(Self(fresh.to_vec())),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(format!("cannot create {}: {e}", path.display())),
        }
        let meta =
            std::fs::metadata(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        if meta.mode() & 0o077 != 0 {
            return Err(format!(
                "{} can be read by others: make it private with `chmod 600 {}`",
                path.display(),
                path.display()
            ));
        }
        let key =
            std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        if key.len() != FILE_KEY {
            return Err(format!(
                "{} is not a codemode state key ({} bytes, expected {FILE_KEY})",
                path.display(),
                key.len()
            ));
        }
        Ok(Self(key))
    }
}

/// A fresh run id: 128 random bits in hex, which also makes it safe in a path or a key.
pub fn new_run_id() -> Result<String, String> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(|e| format!("no randomness for a run id: {e}"))?;
    Ok(super::memory::hex(&bytes))
}

/// Whether `id` is something [`new_run_id`] could have made.
pub fn is_run_id(id: &str) -> bool {
    id.len() == 32 && id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}
