//! What environment a command starts with. Both backends keep codemode's own secrets out of
//! it; the sandbox also starts from a short list of harmless variables instead of everything
//! codemode inherited.

use std::ffi::{OsStr, OsString};

use crate::SetupError;

/// Variables that hold codemode's own credentials: the state store's key, the HTTP server's
/// token, and the AWS credentials given for an S3 state store. No command sees them, on any
/// backend, and none may be passed through by name.
pub const SECRETS: &[&str] = &[
    "CODEMODE_STATE_KEY",
    "CODEMODE_MCP_TOKEN",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_SECURITY_TOKEN",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_CONTAINER_AUTHORIZATION_TOKEN",
];

/// What a sandboxed command inherits by default (`LC_*` too): enough for shells, locales and
/// terminals, nothing that names a credential.
const SANDBOX_DEFAULTS: &[&str] = &["PATH", "HOME", "LANG", "LANGUAGE", "TERM", "USER"];

pub(crate) fn is_secret(name: &OsStr) -> bool {
    SECRETS.iter().any(|secret| OsStr::new(secret) == name)
}

/// Refuses a pass-through list that names one of codemode's secrets or an impossible name.
pub fn check_pass_through(names: &[String]) -> Result<(), SetupError> {
    for name in names {
        if name.is_empty() || name.contains('=') || name.contains('\0') {
            return Err(SetupError::EnvironmentName { name: name.clone() });
        }
        if is_secret(OsStr::new(name)) {
            return Err(SetupError::SecretEnvironment { name: name.clone() });
        }
    }
    Ok(())
}

/// The local backend's environment: everything this process has, less its secrets.
pub(crate) fn inherited() -> Vec<(OsString, OsString)> {
    std::env::vars_os()
        .filter(|(name, _)| !is_secret(name))
        .collect()
}

/// The sandbox's environment: the defaults, `LC_*`, and the names passed through.
pub(crate) fn minimal(pass_through: &[String]) -> Vec<(OsString, OsString)> {
    std::env::vars_os()
        .filter(|(name, _)| {
            let text = name.to_string_lossy();
            SANDBOX_DEFAULTS.contains(&text.as_ref())
                || text.starts_with("LC_")
                || pass_through.iter().any(|pass| pass.as_str() == text)
        })
        .filter(|(name, _)| !is_secret(name))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_cannot_be_passed_through() {
        let refused = check_pass_through(&["CODEMODE_STATE_KEY".into()]).unwrap_err();
        assert!(
            matches!(&refused, SetupError::SecretEnvironment { name } if name == "CODEMODE_STATE_KEY"),
            "{refused:?}"
        );
        assert!(refused.to_string().contains("never passed"));
        assert!(matches!(
            check_pass_through(&["A=b".into()]),
            Err(SetupError::EnvironmentName { .. })
        ));
        assert!(matches!(
            check_pass_through(&["".into()]),
            Err(SetupError::EnvironmentName { .. })
        ));
        assert!(check_pass_through(&["GITHUB_TOKEN".into()]).is_ok());
    }
}
