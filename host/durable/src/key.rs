//! The key that authenticates paused-run records.
//!
//! `CODEMODE_STATE_KEY` (at least 32 characters, shared by every process that resumes the
//! others' runs) wins; otherwise `<state dir>/key`, 32 random bytes created `0600` on first
//! use. The key file is used only when it is a regular file (not a symlink) that belongs to the
//! user and that no one else may read or write, in a state directory that is the user's own
//! (see `private.rs`): anyone who could replace it could forge paused runs.

use super::DurabilityError;
use std::io::{Read, Write};
use std::path::Path;

use super::private::{self, Access, PrivateDir};

/// The environment variable that carries the key.
pub const KEY_ENV: &str = "CODEMODE_STATE_KEY";
const MIN_ENV_KEY: usize = 32;
const FILE_KEY: usize = 32;
const KEY_FILE: &str = "key";
/// HKDF's salt for keys derived from the state key ([`Key::derive`]).
const DERIVE_SALT: &[u8] = b"codemode state key derivation";

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

    /// A key for `purpose` alone, derived with HKDF-SHA256: what one use of the state key
    /// learns or leaks says nothing of another's key, and a key of the environment (any
    /// string of 32 characters or more) is made uniform first.
    pub fn derive(&self, purpose: &[u8]) -> [u8; 32] {
        let hkdf = hkdf::Hkdf::<sha2::Sha256>::new(Some(DERIVE_SALT), &self.0);
        let mut derived = [0u8; 32];
        // HKDF-SHA256 refuses only more than 255 × 32 = 8,160 bytes: 32 cannot fail.
        hkdf.expand(purpose, &mut derived)
            .expect("32 bytes is within HKDF-SHA256's output limit");
        derived
    }

    /// The environment's key, else the one kept in `dir` (refused when there is no `dir`).
    pub fn load(dir: Option<&Path>) -> Result<Self, DurabilityError> {
        if let Some(key) = std::env::var_os(KEY_ENV) {
            let key = key.into_encoded_bytes();
            if key.len() < MIN_ENV_KEY {
                return Err(DurabilityError::ShortKey { min: MIN_ENV_KEY });
            }
            return Ok(Self(key));
        }
        match dir {
            Some(dir) => Self::from_dir(dir).map_err(DurabilityError::KeyFile),
            None => Err(DurabilityError::NoKey),
        }
    }

    /// The key file of the state directory `dir`, created on first use.
    fn from_dir(dir: &Path) -> Result<Self, String> {
        let state = PrivateDir::open(dir, true)?
            .ok_or_else(|| format!("the state directory {} vanished", dir.display()))?;
        match read_key(&state) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            found => return found.map_err(|e| e.into_message(&state)).map(Self),
        }
        let mut fresh = [0u8; FILE_KEY];
        getrandom::fill(&mut fresh).map_err(|e| format!("no randomness for a state key: {e}"))?;
        // Written whole under a private name, then linked into place: a process that finds
        // the key never sees it half-written, and of two first users one key wins.
        let tmp = format!("{KEY_FILE}.{}.tmp", std::process::id());
        let _ = state.remove(&tmp);
        let linked = state
            .create_new(&tmp, 0o600)
            .and_then(|mut file| file.write_all(&fresh).and_then(|()| file.sync_all()))
            .and_then(|()| state.link(&tmp, KEY_FILE));
        let _ = state.remove(&tmp);
        match linked {
            Ok(()) => {
                let _ = state.sync();
                return Ok(Self(fresh.to_vec()));
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => {
                return Err(format!(
                    "cannot create {}: {e}",
                    state.path(KEY_FILE).display()
                ))
            }
        }
        read_key(&state)
            .map_err(|e| e.into_message(&state))
            .map(Self)
    }
}

/// Why the key file could not be read.
enum KeyError {
    Io(std::io::Error),
    Refused(String),
}

impl KeyError {
    fn kind(&self) -> std::io::ErrorKind {
        match self {
            KeyError::Io(e) => e.kind(),
            KeyError::Refused(_) => std::io::ErrorKind::Other,
        }
    }

    fn into_message(self, state: &PrivateDir) -> String {
        match self {
            KeyError::Io(e) => format!(
                "cannot read the state key {}: {}",
                state.path(KEY_FILE).display(),
                private::why(&e)
            ),
            KeyError::Refused(message) => message,
        }
    }
}

/// The key file's bytes, checked through the descriptor they are read from.
fn read_key(state: &PrivateDir) -> Result<Vec<u8>, KeyError> {
    let file = state.open_read(KEY_FILE).map_err(KeyError::Io)?;
    let len = private::checked_file(&file, state, KEY_FILE, "the state key", Access::OwnerOnly)
        .map_err(KeyError::Refused)?;
    let path = state.path(KEY_FILE);
    let not_a_key = |len: u64| {
        KeyError::Refused(format!(
            "{} is not a codemode state key ({len} bytes, expected {FILE_KEY})",
            path.display()
        ))
    };
    if len != FILE_KEY as u64 {
        return Err(not_a_key(len));
    }
    let mut key = Vec::with_capacity(FILE_KEY + 1);
    file.take(FILE_KEY as u64 + 1)
        .read_to_end(&mut key)
        .map_err(KeyError::Io)?;
    if key.len() != FILE_KEY {
        return Err(not_a_key(key.len() as u64));
    }
    Ok(key)
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn scratch(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("codemode-key-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn the_key_file_is_made_private_and_refused_when_anyone_else_could_use_it() {
        let dir = scratch("modes");
        let made = Key::from_dir(&dir).unwrap();
        let path = dir.join(KEY_FILE);
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(Key::from_dir(&dir).unwrap().bytes(), made.bytes(), "kept");

        for mode in [0o644, 0o640, 0o604, 0o660] {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
            let refused = Key::from_dir(&dir).unwrap_err();
            assert!(refused.contains(&path.display().to_string()), "{refused}");
            assert!(refused.contains(&format!("mode {mode:04o}")), "{refused}");
            assert!(refused.contains("chmod 600"), "{refused}");
        }
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o400)).unwrap();
        assert!(
            Key::from_dir(&dir).is_ok(),
            "read-only to its owner is private"
        );

        // A symlink at the name is not followed, even to a private key.
        let elsewhere = scratch("elsewhere");
        let other = Key::from_dir(&elsewhere).unwrap();
        assert_ne!(other.bytes(), made.bytes());
        std::fs::remove_file(&path).unwrap();
        std::os::unix::fs::symlink(elsewhere.join(KEY_FILE), &path).unwrap();
        let refused = Key::from_dir(&dir).unwrap_err();
        assert!(refused.contains("symbolic link"), "{refused}");

        // Not 32 bytes: not a key.
        std::fs::remove_file(&path).unwrap();
        std::fs::write(&path, b"short").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        let refused = Key::from_dir(&dir).unwrap_err();
        assert!(refused.contains("not a codemode state key"), "{refused}");
        let _ = std::fs::remove_dir_all(&dir);
        let _ = std::fs::remove_dir_all(&elsewhere);
    }

    #[test]
    fn a_key_or_directory_of_another_user_is_refused() {
        if private::euid() != 0 {
            eprintln!("skipped: giving a file to another user needs root");
            return;
        }
        let nobody = 65534;
        let dir = scratch("owner");
        Key::from_dir(&dir).unwrap();
        let path = dir.join(KEY_FILE);
        std::os::unix::fs::chown(&path, Some(nobody), None).unwrap();
        let refused = Key::from_dir(&dir).unwrap_err();
        assert!(refused.contains("belongs to uid 65534"), "{refused}");
        assert!(refused.contains(&path.display().to_string()), "{refused}");
        std::os::unix::fs::chown(&path, Some(0), None).unwrap();
        assert!(Key::from_dir(&dir).is_ok());
        std::os::unix::fs::chown(&dir, Some(nobody), Some(nobody)).unwrap();
        let refused = Key::from_dir(&dir).unwrap_err();
        assert!(refused.contains("the state directory"), "{refused}");
        assert!(refused.contains("belongs to uid 65534"), "{refused}");
        assert!(
            refused.contains(&format!("chown 0 {}", dir.display())),
            "{refused}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
