//! Agent scopes (the nested layers tools are registered into) and opaque execution tokens.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

pub(crate) fn next_id() -> u64 {
    NEXT_ID.fetch_add(1, Ordering::Relaxed)
}

/// An agent's scope: registrations, restrictions, guards and presentation made through it
/// apply to this agent and every agent nested under it. It is also the agent's identity in
/// calls ([`crate::tools::ToolExecutionInput::agent`]). Cheap to clone; equality is identity.
#[derive(Clone)]
pub struct AgentScope {
    node: Arc<ScopeNode>,
}

pub(crate) struct ScopeNode {
    id: u64,
    /// Scope ids from the farthest ancestor to this scope itself.
    chain: Arc<[u64]>,
}

impl AgentScope {
    /// A top-level agent scope (its parent is the global layer).
    pub fn root() -> Self {
        let id = next_id();
        Self {
            node: Arc::new(ScopeNode {
                id,
                chain: Arc::from([id]),
            }),
        }
    }

    /// A scope nested under this one: it inherits this scope's tools and restrictions.
    pub fn child(&self) -> Self {
        let id = next_id();
        let mut chain = self.node.chain.to_vec();
        chain.push(id);
        Self {
            node: Arc::new(ScopeNode {
                id,
                chain: Arc::from(chain),
            }),
        }
    }

    /// The scope's process-unique id (the `agent` recorded on `tool/call` events).
    pub fn id(&self) -> u64 {
        self.node.id
    }

    /// Scope ids from the farthest ancestor to this scope.
    pub(crate) fn chain(&self) -> &[u64] {
        &self.node.chain
    }

    pub(crate) fn downgrade(&self) -> Weak<ScopeNode> {
        Arc::downgrade(&self.node)
    }
}

impl PartialEq for AgentScope {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.node, &other.node)
    }
}

impl Eq for AgentScope {}

impl std::hash::Hash for AgentScope {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.node.id.hash(state);
    }
}

impl fmt::Debug for AgentScope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "AgentScope({:?})", self.node.chain)
    }
}

/// The opaque identity of one execution, fresh per call; nested calls carry their parent's.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct ExecutionToken(pub(crate) u64);

impl ExecutionToken {
    pub(crate) fn fresh() -> Self {
        Self(next_id())
    }
}

impl fmt::Debug for ExecutionToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ExecutionToken(..)")
    }
}
