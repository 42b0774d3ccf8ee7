//! A call policy by tool name: tools denied outright, an allow list, and tools that need a
//! person's approval. Installed as one pre-execute hook, so it meets direct calls and calls
//! from `run_code` programs alike; [`Policy::permits`] is the same rule for deciding what an
//! SDK lists, so a prompt declares exactly what a program may call.
//!
//! `run_code` itself is never subject to the policy: it is the transport, and each call a
//! program makes through it is judged on its own.

use std::collections::BTreeSet;
use std::sync::Arc;

use crate::tools::hooks::PreDecision;
use crate::tools::registry::{RegistrationGuard, Registry};
use crate::tools::RUN_CODE_NAME;

/// Which tools may be called, and which only with approval.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Policy {
    deny: BTreeSet<String>,
    allow: Option<BTreeSet<String>>,
    ask: BTreeSet<String>,
    exempt: BTreeSet<String>,
}

impl Policy {
    /// A policy that permits everything.
    pub fn new() -> Self {
        Self::default()
    }

    /// Denies `name` (deny wins over allow).
    pub fn deny(mut self, name: impl Into<String>) -> Self {
        self.deny.insert(name.into());
        self
    }

    /// Adds `name` to the allow list; once there is one, every tool not on it is denied.
    pub fn allow(mut self, name: impl Into<String>) -> Self {
        self.allow
            .get_or_insert_with(BTreeSet::new)
            .insert(name.into());
        self
    }

    /// Keeps `name` callable under an allow list that does not name it (a deny still wins):
    /// for a tool the host offers beside the listed ones, such as a search over them.
    pub fn exempt(mut self, name: impl Into<String>) -> Self {
        self.exempt.insert(name.into());
        self
    }

    /// Calls to `name` need approval (through the registry's approval hook; without one they
    /// are denied).
    pub fn ask(mut self, name: impl Into<String>) -> Self {
        self.ask.insert(name.into());
        self
    }

    /// Every tool name the policy mentions.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.deny
            .iter()
            .chain(self.allow.iter().flatten())
            .chain(&self.ask)
            .map(String::as_str)
    }

    /// Whether calls to `name` can succeed under this policy (asking may still refuse them).
    pub fn permits(&self, name: &str) -> bool {
        self.denial(name).is_none()
    }

    /// Why a call to `name` is denied, if it is.
    pub fn denial(&self, name: &str) -> Option<String> {
        if name == RUN_CODE_NAME {
            return None;
        }
        if self.deny.contains(name) {
            return Some(format!("tool \"{name}\" is denied by policy"));
        }
        match &self.allow {
            Some(allowed) if !allowed.contains(name) && !self.exempt.contains(name) => {
                let listed: Vec<&str> = allowed.iter().map(String::as_str).collect();
                Some(format!(
                    "tool \"{name}\" is not in the allowed set ({})",
                    listed.join(", ")
                ))
            }
            _ => None,
        }
    }

    /// Whether calls to `name` need approval.
    pub fn needs_approval(&self, name: &str) -> bool {
        name != RUN_CODE_NAME && self.ask.contains(name)
    }

    /// Installs the policy as a pre-execute hook: denials deny, approvals ask, the rest of the
    /// chain decides everything else.
    pub fn install(self, registry: &Registry) -> RegistrationGuard {
        let policy = Arc::new(self);
        registry.on_pre_execute(move |call, next| {
            let policy = policy.clone();
            async move {
                if let Some(reason) = policy.denial(call.name()) {
                    return Ok(PreDecision::Deny { reason });
                }
                if policy.needs_approval(call.name()) {
                    return Ok(PreDecision::Ask {
                        reason: Some(format!("tool \"{}\" needs approval", call.name())),
                    });
                }
                next.run().await
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deny_wins_over_allow_and_run_code_is_exempt() {
        let policy = Policy::new().allow("echo").allow("fail").deny("fail");
        assert!(policy.permits("echo"));
        assert_eq!(
            policy.denial("fail").as_deref(),
            Some("tool \"fail\" is denied by policy")
        );
        assert_eq!(
            policy.denial("sleep").as_deref(),
            Some("tool \"sleep\" is not in the allowed set (echo, fail)")
        );
        assert!(policy.permits(RUN_CODE_NAME));
        assert!(Policy::new().deny(RUN_CODE_NAME).permits(RUN_CODE_NAME));
    }

    #[test]
    fn asking_is_per_tool() {
        let policy = Policy::new().ask("fail");
        assert!(policy.needs_approval("fail"));
        assert!(!policy.needs_approval("echo"));
        assert!(policy.permits("fail"));
        assert_eq!(policy.names().collect::<Vec<_>>(), vec!["fail"]);
    }
}
