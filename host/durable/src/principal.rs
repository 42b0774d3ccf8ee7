//! Who a paused run, a `requestState` or a task belongs to: the client a server answered.
//!
//! A principal is a digest, never the secret it stands for: for a client that authenticated
//! with a bearer token, a digest of the token's digest; for a client of an MCP session, of the
//! session's id; otherwise the one anonymous principal, which every client without either
//! shares. The server decides which applies (`cli/http.rs`, `mcp/server.rs`); the store only
//! compares them, and keeps under their names only an HMAC of them under the state key
//! ([`Principal::owner_id`]), so that a directory listing tells nothing of who paused what.

use hmac::Mac;
use sha2::{Digest, Sha256};

use super::memory::hex;
use super::record::mac;

/// Keeps principal digests apart from every other digest codemode takes.
const CONTEXT: &[u8] = b"codemode principal\0";
/// Keeps owner ids apart from every other use of the state key.
const OWNER_CONTEXT: &[u8] = b"codemode owner\0";

/// A client, as far as the state store is concerned (see the module's documentation).
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Principal([u8; 32]);

impl std::fmt::Debug for Principal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Short enough to tell principals apart in a log, too short to stand for one.
        write!(f, "Principal({}…)", hex(&self.0[..4]))
    }
}

impl Principal {
    fn of(kind: &str, value: &[u8]) -> Self {
        let mut digest = Sha256::new();
        digest.update(CONTEXT);
        digest.update(kind.as_bytes());
        digest.update([0]);
        digest.update(value);
        Self(digest.finalize().into())
    }

    /// The client holding the bearer token whose SHA-256 is `token_digest` (the server keeps
    /// only that digest, so the principal is made from it, never from the token).
    pub fn token(token_digest: &[u8; 32]) -> Self {
        Self::of("token", token_digest)
    }

    /// The client of MCP session `session_id`.
    pub fn session(session_id: &str) -> Self {
        Self::of("session", session_id.as_bytes())
    }

    /// Every client the server cannot tell apart: no token, no session (a stateless server
    /// without a token, a client of stdio).
    pub fn anonymous() -> Self {
        Self::of("anonymous", b"")
    }

    /// The 32 bytes a `requestState`'s tag covers.
    pub fn digest(&self) -> &[u8; 32] {
        &self.0
    }

    /// The name the store keeps this principal's paused runs under: 128 bits of an HMAC under
    /// the state key, in hex (the shape of a run id, so every check of names holds for it).
    pub fn owner_id(&self, key: &[u8]) -> String {
        let mut tag = mac(key);
        tag.update(OWNER_CONTEXT);
        tag.update(&self.0);
        hex(&tag.finalize().into_bytes()[..16])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn principals_differ_by_kind_and_value_and_owner_ids_by_key() {
        let token = Principal::token(&[7; 32]);
        assert_eq!(token, Principal::token(&[7; 32]));
        assert_ne!(token, Principal::token(&[8; 32]));
        assert_ne!(Principal::session("a"), Principal::session("b"));
        assert_ne!(Principal::session(""), Principal::anonymous());
        let key = b"k".repeat(32);
        let owner = token.owner_id(&key);
        assert!(super::super::key::is_run_id(&owner), "{owner}");
        assert_ne!(owner, token.owner_id(&b"x".repeat(32)));
        assert_ne!(owner, Principal::anonymous().owner_id(&key));
        assert!(!format!("{token:?}").contains(&hex(token.digest())));
    }
}
