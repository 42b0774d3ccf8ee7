//! MCP both ways: upstream servers whose tools programs call ([`upstream`]), and the
//! `codemode mcp` server that offers `run_code` to any MCP client ([`server`]; a paused run is
//! put to the client as questions by `input`), with bounded, expiring sessions for its HTTP
//! transport ([`sessions`]). Both use `rmcp`, the official Rust
//! SDK.

mod input;
pub mod server;
pub mod sessions;
mod trace;
pub mod upstream;

use codemode_runtime::tools::{RegistrationGuard, Registry};

pub use upstream::{Upstream, UpstreamError, UpstreamSpec};

/// Registers every tool of `upstreams` globally. Returns the registrations and, for people, a
/// note per tool left out (an unusable schema, or a name taken after prefixing).
pub fn register(
    registry: &Registry,
    upstreams: &[Upstream],
) -> (Vec<RegistrationGuard>, Vec<String>) {
    let mut guards = Vec::new();
    let mut notes = Vec::new();
    for upstream in upstreams {
        let (definitions, skipped) = upstream.definitions();
        notes.extend(skipped);
        for definition in definitions {
            let name = definition.name().to_owned();
            match registry.register(definition, None) {
                Ok(guard) => guards.push(guard),
                Err(error) => notes.push(format!(
                    "mcp server \"{}\": tool \"{name}\" left out: {error}",
                    upstream.name()
                )),
            }
        }
    }
    (guards, notes)
}
