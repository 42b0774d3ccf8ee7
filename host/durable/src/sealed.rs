//! Bytes the store keeps that only codemode may read: encrypted and authenticated with
//! XChaCha20-Poly1305 under a key derived from the state key for this use alone.
//!
//! ```text
//! "CMSEAL1\0" | nonce (24 random bytes) | ciphertext | Poly1305 tag (16 bytes)
//! ```
//!
//! The associated data is the magic and the name the bytes are kept under (a task's id and
//! what they are of it), so sealed bytes moved to another name do not open. The nonce is
//! random: at 192 bits, two writes never share one in practice, which a counter across
//! replicas could not promise without coordination.

use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};

const MAGIC: &[u8; 8] = b"CMSEAL1\0";
const NONCE: usize = 24;
const TAG: usize = 16;

/// Why sealed bytes do not open.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SealError {
    /// Not sealed by this version of codemode (an older document, or anything else).
    #[error("it is not sealed the way this codemode seals (written by an earlier version, or by something else)")]
    Foreign,
    /// Changed, moved to another name, or sealed under another state key.
    #[error("it is not authentic (changed, or written with another state key)")]
    NotAuthentic,
    /// No randomness for a nonce.
    #[error("no randomness for a nonce: {0}")]
    Random(String),
}

fn cipher(key: &[u8; 32]) -> XChaCha20Poly1305 {
    XChaCha20Poly1305::new(key.into())
}

fn associated(name: &str) -> Vec<u8> {
    let mut data = Vec::with_capacity(MAGIC.len() + name.len());
    data.extend_from_slice(MAGIC);
    data.extend_from_slice(name.as_bytes());
    data
}

/// `plaintext`, sealed under `key` to be kept as `name`.
pub fn seal(key: &[u8; 32], name: &str, plaintext: &[u8]) -> Result<Vec<u8>, SealError> {
    let mut nonce = [0u8; NONCE];
    getrandom::fill(&mut nonce).map_err(|e| SealError::Random(e.to_string()))?;
    let aad = associated(name);
    let payload = Payload {
        msg: plaintext,
        aad: &aad,
    };
    let sealed = cipher(key)
        .encrypt(&XNonce::from(nonce), payload)
        // Fails only past 256 GiB of plaintext (ChaCha20's counter); documents are capped far
        // below that.
        .map_err(|_| SealError::NotAuthentic)?;
    let mut out = Vec::with_capacity(MAGIC.len() + NONCE + sealed.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&nonce);
    out.extend_from_slice(&sealed);
    Ok(out)
}

/// The plaintext of `bytes`, sealed under `key` as `name`.
pub fn open(key: &[u8; 32], name: &str, bytes: &[u8]) -> Result<Vec<u8>, SealError> {
    let rest = bytes.strip_prefix(MAGIC).ok_or(SealError::Foreign)?;
    if rest.len() < NONCE + TAG {
        return Err(SealError::NotAuthentic);
    }
    let (nonce, sealed) = rest.split_at(NONCE);
    let nonce: [u8; NONCE] = nonce.try_into().map_err(|_| SealError::NotAuthentic)?;
    let aad = associated(name);
    let payload = Payload {
        msg: sealed,
        aad: &aad,
    };
    cipher(key)
        .decrypt(&XNonce::from(nonce), payload)
        .map_err(|_| SealError::NotAuthentic)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sealed_bytes_open_only_under_their_key_and_name_and_hide_what_they_hold() {
        let key = [7u8; 32];
        let secret = b"return await tools.deploy({ target: 'prod' })";
        let sealed = seal(&key, "task:1", secret).unwrap();
        assert!(
            !sealed.windows(secret.len()).any(|w| w == secret),
            "no plaintext"
        );
        assert_eq!(open(&key, "task:1", &sealed).unwrap(), secret);
        assert_ne!(
            seal(&key, "task:1", secret).unwrap(),
            sealed,
            "a fresh nonce each time"
        );
        assert_eq!(open(&key, "task:2", &sealed), Err(SealError::NotAuthentic));
        assert_eq!(
            open(&[8u8; 32], "task:1", &sealed),
            Err(SealError::NotAuthentic)
        );
        for at in [8, 8 + NONCE, sealed.len() - 1] {
            let mut changed = sealed.clone();
            changed[at] ^= 1;
            assert_eq!(
                open(&key, "task:1", &changed),
                Err(SealError::NotAuthentic),
                "byte {at}"
            );
        }
        assert_eq!(
            open(&key, "task:1", &sealed[..MAGIC.len() + NONCE + TAG - 1]),
            Err(SealError::NotAuthentic)
        );
        assert_eq!(
            open(&key, "task:1", b"0123abcd\n{\"status\":\"working\"}"),
            Err(SealError::Foreign)
        );
    }
}
