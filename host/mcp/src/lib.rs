//! MCP both ways: upstream servers whose tools programs call ([`upstream`]), and the
//! `codemode mcp` server that offers `run_code` to any MCP client ([`server`]; a paused run is
//! put to the client as questions by `input`, and upstream progress reaches it through
//! `progress`), with bounded, expiring sessions for its HTTP transport ([`sessions`]). Both
//! use `rmcp`, the official Rust SDK.
//!
//! The server hands each program to the sandbox (`codemode-host`) through `run_code`, the
//! same pipeline a direct call takes; upstream tools join that pipeline's registry like any
//! other. Paused runs and tasks are kept by `codemode-durable`.

#![warn(missing_docs)]

mod discovery;
mod input;
pub mod progress;
pub mod server;
pub mod sessions;
mod tasks;
mod trace;
pub mod upstream;

use codemode_runtime::tools::{RegistrationGuard, Registry, ToolDefinition};
use tokio::sync::watch;

pub use upstream::{Upstream, UpstreamError, UpstreamSpec};

/// The upstream servers' tools in a registry, kept in step with what the servers list (after
/// a restart, or when a server says its tools changed). Dropping it removes them.
pub struct Registered {
    keepers: Vec<tokio::task::JoinHandle<()>>,
    changes: watch::Receiver<u64>,
}

impl Drop for Registered {
    fn drop(&mut self) {
        // Each keeper holds its server's registrations: ending it removes them.
        for keeper in &self.keepers {
            keeper.abort();
        }
    }
}

impl Registered {
    /// Counts the changes of the registered tools: for those who tell clients of them.
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.changes.clone()
    }
}

/// Registers every tool of `upstreams` globally, and keeps them registered as their lists
/// change. Returns the registrations and, for people, a note per tool left out (an unusable
/// schema, or a name taken after prefixing). Call it within a tokio runtime.
pub fn register(registry: &Registry, upstreams: &[Upstream]) -> (Registered, Vec<String>) {
    let (changed, changes) = watch::channel(0u64);
    let changed = std::sync::Arc::new(changed);
    let mut notes = Vec::new();
    let mut keepers = Vec::new();
    for upstream in upstreams {
        // Subscribed before the first list is read, so no later list can slip between them.
        let mut listed = upstream.tools();
        let define = upstream.definer();
        let first = listed.borrow_and_update().clone();
        let (definitions, skipped) = define(&first);
        notes.extend(skipped);
        let mut guards = register_each(registry, upstream.name(), definitions, &mut notes);
        let (registry, changed, server) = (
            registry.clone(),
            changed.clone(),
            upstream.name().to_owned(),
        );
        keepers.push(tokio::spawn(async move {
            while listed.changed().await.is_ok() {
                let tools = listed.borrow_and_update().clone();
                // The old names go first: a tool the server still lists is registered again.
                guards.clear();
                let (definitions, skipped) = define(&tools);
                let mut notes = skipped;
                guards = register_each(&registry, &server, definitions, &mut notes);
                for note in notes {
                    tracing::warn!("{note}");
                }
                changed.send_modify(|n| *n += 1);
            }
        }));
    }
    (Registered { keepers, changes }, notes)
}

fn register_each(
    registry: &Registry,
    server: &str,
    definitions: Vec<ToolDefinition>,
    notes: &mut Vec<String>,
) -> Vec<RegistrationGuard> {
    let mut guards = Vec::new();
    for definition in definitions {
        let name = definition.name().to_owned();
        match registry.register(definition, None) {
            Ok(guard) => guards.push(guard),
            Err(error) => notes.push(format!(
                "mcp server \"{server}\": tool \"{name}\" left out: {error}"
            )),
        }
    }
    guards
}
