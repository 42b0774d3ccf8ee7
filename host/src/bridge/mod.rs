//! The guest ↔ host bridge: the wire format and the imports that speak it.

pub mod imports;
pub mod wire;
