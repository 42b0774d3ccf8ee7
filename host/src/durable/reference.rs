//! A paused run named to someone outside codemode, for a later resume by any process that
//! shares the store and its key: the `requestState` of an MCP input-required result.
//!
//! ```text
//! cm1.<run id>.<expiry, Unix ms>.<HMAC-SHA256 in hex>
//! ```
//!
//! The tag is over a context string and everything before it, under the state key, so a
//! reference names exactly the run and expiry it was made for and no one without the key can
//! make one. It grants nothing a run id does not: the record is still checked, claimed and
//! resumed once, and a replayed reference meets the run's consumed mark.

use hmac::Mac;

use super::key::is_run_id;
use super::memory::unhex;
use super::record::{mac, HmacSha256};

const VERSION: &str = "cm1";
/// Keeps these tags apart from every other use of the key (records are tagged over bytes
/// that start with `CMPAUSE\0`).
const CONTEXT: &[u8] = b"codemode paused-run reference\0";

/// Why a reference is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ReferenceError {
    /// Not something codemode writes.
    #[error(
        "it is not a paused-run reference codemode made (expected {VERSION}.RUN_ID.EXPIRY.TAG)"
    )]
    Malformed,
    /// Written without this store's key, or changed since.
    #[error("it is not authentic (changed, or made with another state key)")]
    NotAuthentic,
    /// Past its expiry (the state store's time to live after the pause).
    #[error("it expired at {at}; the paused run can no longer be resumed")]
    Expired {
        /// When, as RFC 3339.
        at: String,
    },
}

fn tag(key: &[u8], body: &str) -> HmacSha256 {
    let mut mac = mac(key);
    mac.update(CONTEXT);
    mac.update(body.as_bytes());
    mac
}

/// The reference to `run_id`, good until `expires_at_ms`.
pub(crate) fn seal(key: &[u8], run_id: &str, expires_at_ms: u64) -> String {
    let body = format!("{VERSION}.{run_id}.{expires_at_ms}");
    let tag = tag(key, &body).finalize().into_bytes();
    format!("{body}.{}", super::memory::hex(&tag))
}

/// The run id `reference` names, once its tag and expiry are checked at `now_ms`.
pub(crate) fn open(key: &[u8], reference: &str, now_ms: u64) -> Result<String, ReferenceError> {
    let (body, tag_hex) = reference
        .rsplit_once('.')
        .ok_or(ReferenceError::Malformed)?;
    let mut parts = body.split('.');
    let (Some(VERSION), Some(run_id), Some(expiry), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(ReferenceError::Malformed);
    };
    let expires_at_ms: u64 = expiry.parse().map_err(|_| ReferenceError::Malformed)?;
    if !is_run_id(run_id) || expiry != expires_at_ms.to_string() {
        return Err(ReferenceError::Malformed);
    }
    let presented = Some(tag_hex)
        .filter(|t| t.len() == 64)
        .and_then(|t| unhex(t.as_bytes()))
        .ok_or(ReferenceError::Malformed)?;
    tag(key, body)
        .verify_slice(&presented)
        .map_err(|_| ReferenceError::NotAuthentic)?;
    if now_ms > expires_at_ms {
        let at = std::time::UNIX_EPOCH + std::time::Duration::from_millis(expires_at_ms);
        return Err(ReferenceError::Expired {
            at: humantime::format_rfc3339_seconds(at).to_string(),
        });
    }
    Ok(run_id.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    const RUN: &str = "0123456789abcdef0123456789abcdef";

    #[test]
    fn a_reference_names_its_run_until_it_expires_and_only_under_its_key() {
        let key = b"k".repeat(32);
        let sealed = seal(&key, RUN, 2_000);
        assert_eq!(open(&key, &sealed, 1_999).as_deref(), Ok(RUN));
        assert_eq!(open(&key, &sealed, 2_000).as_deref(), Ok(RUN));
        assert!(matches!(
            open(&key, &sealed, 2_001),
            Err(ReferenceError::Expired { at }) if at == "1970-01-01T00:00:02Z"
        ));
        assert_eq!(
            open(&b"other".repeat(8), &sealed, 0),
            Err(ReferenceError::NotAuthentic)
        );
        // A later expiry, or another run, under the old tag.
        let tag = sealed.rsplit_once('.').unwrap().1;
        for forged in [
            format!("cm1.{RUN}.9999999999999.{tag}"),
            format!("cm1.{}.2000.{tag}", "f".repeat(32)),
        ] {
            assert_eq!(open(&key, &forged, 0), Err(ReferenceError::NotAuthentic));
        }
        for malformed in [
            "",
            "cm1",
            "cm1.x.1.00",
            &format!("cm2.{RUN}.2000.{tag}"),
            &format!("cm1.{RUN}.02000.{tag}"),
            &format!("cm1.{RUN}.2000.{tag}.x"),
            &format!("cm1.{RUN}.2000.{}", &tag[..62]),
            &format!("cm1.{RUN}.2000.{}zz", &tag[..62]),
            &format!("cm1.../{RUN}.2000.{tag}"),
        ] {
            assert_eq!(
                open(&key, malformed, 0),
                Err(ReferenceError::Malformed),
                "{malformed}"
            );
        }
    }
}
