//! A paused run named to one client for one request, for a later resume by any process that
//! shares the store and its key: the `requestState` of an MCP input-required result.
//!
//! ```text
//! cm2.<run id>.<expiry, Unix ms>.<HMAC-SHA256 in hex>
//! ```
//!
//! The tag is over a context string, everything before it, the [`Principal`] the reference
//! was issued to and the SHA-256 of the request it answered (the `run_code` arguments in
//! canonical JSON: keys in UTF-16 order, numbers as JavaScript writes them), under the state
//! key. Neither digest is in the reference: the server takes them again from the retry, so
//! a reference opens only for the same client with the same arguments, before its expiry, and
//! no one without the key can make one. It grants nothing more than that: the record is still
//! checked, claimed and resumed once, and a replayed reference meets the run's consumed mark.
//!
//! Every refusal says only that the reference does not match or has expired: never which run,
//! client or request would match.
//!
//! References of the first version (`cm1.…`, bound to the run alone) are refused: accepting
//! them would leave a reference that any client may present valid for a whole time to live
//! after the upgrade, and a client whose run paused across it calls `run_code` again.

use hmac::Mac;
use sha2::{Digest, Sha256};

use super::key::is_run_id;
use super::memory::unhex;
use super::principal::Principal;
use super::record::{mac, HmacSha256};

const VERSION: &str = "cm2";
/// The first version: still recognised, to be refused with a message of its own.
const SUPERSEDED: &str = "cm1.";
/// Keeps these tags apart from every other use of the key (records are tagged over bytes
/// that start with `CMPAUSE\0`, the first version's references under another context).
const CONTEXT: &[u8] = b"codemode paused-run reference, bound\0";

/// Why a reference is refused. No variant says which run, client or request would match.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ReferenceError {
    /// Made for another client or other arguments, changed, not codemode's, or made under
    /// another state key: which of these is deliberately not said.
    #[error("it does not match this request (it was made for another client or for other arguments, or it was changed)")]
    Mismatch,
    /// Past its expiry (the state store's time to live after the pause).
    #[error("it has expired, and the paused run can no longer be resumed; call run_code again")]
    Expired,
    /// Made by an earlier codemode, whose references named a run but no client or request.
    #[error("it was made by an earlier version of codemode, whose requestState is no longer accepted; call run_code again")]
    Superseded,
}

/// The SHA-256 of `arguments` in canonical JSON: what a reference binds the request by.
pub fn request_digest(arguments: &serde_json::Value) -> [u8; 32] {
    Sha256::digest(codemode_runtime::json::to_string_sorted(arguments).as_bytes()).into()
}

fn tag(key: &[u8], body: &str, principal: &Principal, request: &[u8; 32]) -> HmacSha256 {
    let mut mac = mac(key);
    mac.update(CONTEXT);
    mac.update(body.as_bytes());
    mac.update(b"\0");
    mac.update(principal.digest());
    mac.update(request);
    mac
}

/// The reference to `run_id` for `principal` and the request whose digest is `request`, good
/// until `expires_at_ms`.
pub fn seal(
    key: &[u8],
    run_id: &str,
    expires_at_ms: u64,
    principal: &Principal,
    request: &[u8; 32],
) -> String {
    let body = format!("{VERSION}.{run_id}.{expires_at_ms}");
    let tag = tag(key, &body, principal, request).finalize().into_bytes();
    format!("{body}.{}", super::memory::hex(&tag))
}

/// The run id `reference` names, once it is found made for `principal` and `request` under
/// `key`, and unexpired at `now_ms`.
pub fn open(
    key: &[u8],
    reference: &str,
    principal: &Principal,
    request: &[u8; 32],
    now_ms: u64,
) -> Result<String, ReferenceError> {
    if reference.starts_with(SUPERSEDED) {
        return Err(ReferenceError::Superseded);
    }
    let (body, tag_hex) = reference.rsplit_once('.').ok_or(ReferenceError::Mismatch)?;
    let mut parts = body.split('.');
    let (Some(VERSION), Some(run_id), Some(expiry), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(ReferenceError::Mismatch);
    };
    let expires_at_ms: u64 = expiry.parse().map_err(|_| ReferenceError::Mismatch)?;
    if !is_run_id(run_id) || expiry != expires_at_ms.to_string() {
        return Err(ReferenceError::Mismatch);
    }
    let presented = Some(tag_hex)
        .filter(|t| t.len() == 64)
        .and_then(|t| unhex(t.as_bytes()))
        .ok_or(ReferenceError::Mismatch)?;
    tag(key, body, principal, request)
        .verify_slice(&presented)
        .map_err(|_| ReferenceError::Mismatch)?;
    // Only after the tag: whoever is told a reference expired is whom it was made for.
    if now_ms > expires_at_ms {
        return Err(ReferenceError::Expired);
    }
    Ok(run_id.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const RUN: &str = "0123456789abcdef0123456789abcdef";

    fn request() -> [u8; 32] {
        request_digest(&json!({"code": "return 1", "description": "d"}))
    }

    #[test]
    fn a_reference_opens_for_its_principal_and_request_until_it_expires() {
        let key = b"k".repeat(32);
        let alice = Principal::token(&[1; 32]);
        let sealed = seal(&key, RUN, 2_000, &alice, &request());
        assert!(sealed.starts_with(&format!("cm2.{RUN}.2000.")), "{sealed}");
        assert!(sealed.len() < 140, "short: {sealed}");
        assert_eq!(
            open(&key, &sealed, &alice, &request(), 1_999).as_deref(),
            Ok(RUN)
        );
        assert_eq!(
            open(&key, &sealed, &alice, &request(), 2_000).as_deref(),
            Ok(RUN)
        );
        assert_eq!(
            open(&key, &sealed, &alice, &request(), 2_001),
            Err(ReferenceError::Expired)
        );
        // Another client, another request, another key: the same refusal, and an expired one
        // is not told expired to anyone else.
        for (principal, digest, key) in [
            (Principal::token(&[2; 32]), request(), key.clone()),
            (Principal::session("s"), request(), key.clone()),
            (Principal::anonymous(), request(), key.clone()),
            (
                alice.clone(),
                request_digest(&json!({"code": "return 2"})),
                key.clone(),
            ),
            (alice.clone(), request(), b"other".repeat(8)),
        ] {
            for now in [0, 5_000] {
                assert_eq!(
                    open(&key, &sealed, &principal, &digest, now),
                    Err(ReferenceError::Mismatch)
                );
            }
        }
    }

    #[test]
    fn the_request_digest_is_of_canonical_json() {
        let a = json!({"description": "d", "code": "return 1"});
        let b: serde_json::Value =
            serde_json::from_str(r#"{ "code" : "return 1", "description":"d" }"#).unwrap();
        assert_eq!(request_digest(&a), request_digest(&b));
        assert_ne!(
            request_digest(&a),
            request_digest(&json!({"code": "return 1"}))
        );
    }

    #[test]
    fn changed_malformed_and_first_version_references_are_refused_without_saying_more() {
        let key = b"k".repeat(32);
        let who = Principal::anonymous();
        let sealed = seal(&key, RUN, 2_000, &who, &request());
        let tag = sealed.rsplit_once('.').unwrap().1;
        let mut flipped = sealed.clone().into_bytes();
        let last = flipped.len() - 1;
        flipped[last] = if flipped[last] == b'0' { b'1' } else { b'0' };
        let flipped = String::from_utf8(flipped).unwrap();
        for changed in [
            format!("cm2.{RUN}.9999999999999.{tag}"),
            format!("cm2.{}.2000.{tag}", "f".repeat(32)),
            flipped,
            String::new(),
            "cm2".into(),
            "cm2.x.1.00".into(),
            format!("cm3.{RUN}.2000.{tag}"),
            format!("cm2.{RUN}.02000.{tag}"),
            format!("cm2.{RUN}.2000.{tag}.x"),
            format!("cm2.{RUN}.2000.{}", &tag[..62]),
            format!("cm2.{RUN}.2000.{}zz", &tag[..62]),
            format!("cm2.../{RUN}.2000.{tag}"),
        ] {
            let refused = open(&key, &changed, &who, &request(), 0);
            assert_eq!(refused, Err(ReferenceError::Mismatch), "{changed}");
        }
        let old = format!("cm1.{RUN}.2000.{tag}");
        assert_eq!(
            open(&key, &old, &who, &request(), 0),
            Err(ReferenceError::Superseded)
        );
        for error in [
            ReferenceError::Mismatch,
            ReferenceError::Expired,
            ReferenceError::Superseded,
        ] {
            let said = error.to_string();
            // No run id, call id or time: nothing but that it does not match, or expired.
            assert!(!said.chars().any(|c| c.is_ascii_digit()), "{said}");
        }
    }
}
