//! Schemas for tool parameters and outputs.
//!
//! Three sources, one [`Schema`] type: the typed author DSL ([`dsl`]), the raw enforced subset
//! ([`assert_supported_schema`]), and foreign full JSON Schema documents (MCP tools), which a full
//! validator checks ([`Schema::foreign`]). Validation never applies defaults and reports
//! path-qualified violations in the reference's words. Every walk is iterative.

pub mod dsl;
mod foreign;
mod subset;
mod validate;

use std::fmt;
use std::sync::Arc;

use serde_json::Value;

use super::error::codes;
pub use foreign::{FOREIGN_INSTANCE_DEPTH_LIMIT, FOREIGN_SCHEMA_DEPTH_LIMIT};
pub use subset::assert_supported_schema;
pub use validate::validate_value;

/// A schema outside what the registry can enforce; `violations` lists every offending path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SchemaError {
    violations: Vec<String>,
}

impl SchemaError {
    pub(crate) fn new(violations: Vec<String>) -> Self {
        Self { violations }
    }

    /// Every path-qualified violation, in the order found.
    pub fn violations(&self) -> &[String] {
        &self.violations
    }

    /// Always `UNSUPPORTED_SCHEMA`.
    pub fn code(&self) -> &'static str {
        codes::UNSUPPORTED_SCHEMA
    }
}

impl fmt::Display for SchemaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unsupported JSON schema: {}", self.violations.join("; "))
    }
}

impl std::error::Error for SchemaError {}

/// A checked schema, cheap to clone.
#[derive(Clone)]
pub struct Schema {
    inner: Arc<Inner>,
}

enum Inner {
    /// The enforced subset, validated by [`validate_value`].
    Subset(Value),
    /// Full JSON Schema, validated by the `jsonschema` crate.
    Foreign(foreign::ForeignSchema),
}

impl Drop for Inner {
    fn drop(&mut self) {
        // Compiled schemas may be thousands of levels deep.
        if let Inner::Subset(value) = self {
            crate::json::drop_deep(std::mem::take(value));
        }
    }
}

impl fmt::Debug for Schema {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = if self.is_foreign() {
            "foreign"
        } else {
            "subset"
        };
        f.debug_struct("Schema")
            .field("kind", &kind)
            .field("json", self.json())
            .finish()
    }
}

impl Schema {
    /// A raw schema in the enforced subset; anything else is refused with every violation.
    pub fn raw(schema: Value) -> Result<Self, SchemaError> {
        assert_supported_schema(&schema)?;
        Ok(Self::from_inner(Inner::Subset(schema)))
    }

    /// A full JSON Schema document (as MCP servers publish), validated by a full validator.
    pub fn foreign(schema: Value) -> Result<Self, SchemaError> {
        let compiled = foreign::ForeignSchema::compile(schema)?;
        Ok(Self::from_inner(Inner::Foreign(compiled)))
    }

    /// Compiles a DSL value schema (any JSON root).
    pub fn value(spec: impl Into<dsl::ValueSpec>) -> Result<Self, SchemaError> {
        Self::raw(dsl::compile_value(&spec.into()))
    }

    /// Compiles a DSL parameter map into the implicit open object root.
    pub fn parameters(parameters: dsl::Parameters) -> Result<Self, SchemaError> {
        Self::raw(dsl::compile_parameters(&parameters))
    }

    /// The open object with no declared properties: what a tool without parameters takes.
    pub fn empty_parameters() -> Self {
        Self::from_inner(Inner::Subset(
            serde_json::json!({"type": "object", "properties": {}}),
        ))
    }

    fn from_inner(inner: Inner) -> Self {
        Self {
            inner: Arc::new(inner),
        }
    }

    /// The schema as JSON, exactly as the model sees it.
    pub fn json(&self) -> &Value {
        match &*self.inner {
            Inner::Subset(value) => value,
            Inner::Foreign(foreign) => foreign.json(),
        }
    }

    /// Whether this is a foreign full JSON Schema rather than the enforced subset.
    pub fn is_foreign(&self) -> bool {
        matches!(&*self.inner, Inner::Foreign(_))
    }

    /// Path-qualified violations of `value`; empty means valid. `root` labels the root in
    /// messages: `""` for tool arguments (rendered `arguments`), `"value"` for outputs.
    pub fn validate(&self, value: &Value, root: &str) -> Vec<String> {
        match &*self.inner {
            Inner::Subset(schema) => validate_value(schema, value, root),
            Inner::Foreign(foreign) => foreign.validate(value, root),
        }
    }

    /// [`Schema::validate`] for a value already known to be lossless JSON.
    pub(crate) fn validate_lossless(&self, value: &Value, root: &str) -> Vec<String> {
        match &*self.inner {
            Inner::Subset(schema) => validate::validate_lossless_value(schema, value, root),
            Inner::Foreign(foreign) => foreign.validate(value, root),
        }
    }
}

/// How the validators name a place in a value: the path as written, `arguments` for the
/// root (`""`).
pub fn diagnostic_path(path: &str) -> &str {
    if path.is_empty() {
        "arguments"
    } else {
        path
    }
}

/// Extends a diagnostic path by an object key (`a` then `a.b`).
pub fn push_property(path: &mut String, key: &str) {
    if !path.is_empty() {
        path.push('.');
    }
    path.push_str(key);
}
