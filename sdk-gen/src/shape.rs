//! Lowers JSON Schema values into [`Shape`]s: the language-neutral type tree that both renderers
//! print. All JSON Schema knowledge lives here; the renderers only know shapes.
//!
//! Lowering is total: whatever cannot be expressed becomes [`Shape::Unknown`], never an error.
//! It is also bounded: nesting deeper than [`MAX_DEPTH`] levels lowers to `Unknown` without being
//! visited, union chains are flattened with an explicit work list, and referenced definitions are
//! lowered one after another (not inside each other), so the call depth of lowering and of every
//! renderer that walks shapes is at most a small multiple of `MAX_DEPTH` whatever the input.

use crate::annotations::property_doc;
use crate::refs::{self, RefPlan};
use crate::text::{cmp_utf16, pascal_case};
use serde_json::{Map, Value};
use std::collections::{BTreeMap, BTreeSet};

/// Nesting deeper than this renders as `unknown` (TypeScript) / `Any` (Python). Real tool schemas
/// stay far below it; it keeps every walk over shapes within a few hundred stack frames, and the
/// Python text below CPython's limit of 200 open brackets.
pub const MAX_DEPTH: usize = 64;

/// Index of a shape in its [`Arena`].
pub type ShapeId = usize;
/// Index of a named alias in its [`Arena`].
pub type AliasId = usize;

#[derive(Debug, Clone, PartialEq)]
pub enum Shape {
    /// Cannot be expressed (malformed, remote `$ref`, `not`, `if`/`then`, too deep).
    Unknown,
    /// Any JSON value (no constraint on the type).
    Json,
    /// No value is valid (the `false` schema).
    Never,
    String,
    Number,
    Integer,
    Boolean,
    Null,
    /// `enum` / `const`: scalar JSON values, in schema order.
    Literals(Vec<Value>),
    /// An array of the item shape; `None` when items are unconstrained.
    Array(Option<ShapeId>),
    Object(Object),
    Union(Vec<ShapeId>),
    Intersection(Vec<ShapeId>),
    Alias(AliasId),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Object {
    /// Sorted by key in UTF-16 code-unit order.
    pub properties: Vec<Property>,
    pub rest: Rest,
}

/// What an object allows beyond its declared properties.
#[derive(Debug, Clone, PartialEq)]
pub enum Rest {
    /// `additionalProperties: false`.
    Closed,
    /// `additionalProperties: true` or a schema admitting any JSON, or `patternProperties`.
    Open,
    /// No `additionalProperties`: JSON Schema admits other keys, but the schema's author named
    /// every key they meant, so the SDK shows only those (or any key, when none are declared).
    Unstated,
    Typed(ShapeId),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Property {
    pub key: String,
    pub required: bool,
    /// One-line documentation (description and annotations), not yet escaped for any language.
    pub doc: Option<String>,
    pub shape: ShapeId,
}

/// A named shape: a reused or recursive definition, printed once and referred to by name.
#[derive(Debug, Clone, PartialEq)]
pub struct Alias {
    /// Unique across the whole SDK, PascalCase, never one of the SDK's own names.
    pub name: String,
    pub body: ShapeId,
}

/// Names no alias may take: the SDK's own declarations in both languages and Python's typing names.
const RESERVED_NAMES: [&str; 16] = [
    "JsonValue",
    "JsonObject",
    "ToolArgsMap",
    "ToolOutputMap",
    "ToolName",
    "ToolCallError",
    "Tools",
    "Any",
    "Literal",
    "NotRequired",
    "Protocol",
    "TypeAlias",
    "TypedDict",
    "Exception",
    "Error",
    "Record",
];

/// Every shape and alias of one SDK.
#[derive(Debug, Default)]
pub struct Arena {
    pub shapes: Vec<Shape>,
    pub aliases: Vec<Alias>,
    taken_names: BTreeSet<String>,
}

/// Which side of a tool a schema describes; decides the implicit root and alias names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The parameter root is an implicit open object, as in the reference.
    Args,
    Output,
}

/// Per-document lowering state: the document refs resolve against, and its aliases.
struct Document<'a> {
    root: &'a Value,
    plan: RefPlan,
    aliases: BTreeMap<String, AliasId>,
    /// Named targets whose body still has to be lowered.
    pending: Vec<(AliasId, &'a Value)>,
    tool_pascal: String,
    role: Role,
}

impl Arena {
    pub fn new() -> Self {
        Self {
            taken_names: RESERVED_NAMES.iter().map(|n| (*n).to_owned()).collect(),
            ..Self::default()
        }
    }

    pub fn get(&self, id: ShapeId) -> &Shape {
        // Ids are only made by `push`, so they are always in range; `Unknown` keeps this total.
        self.shapes.get(id).unwrap_or(&Shape::Unknown)
    }

    fn push(&mut self, shape: Shape) -> ShapeId {
        self.shapes.push(shape);
        self.shapes.len() - 1
    }

    /// Lowers one tool's parameters or output schema; `tool_name` only seeds alias names.
    pub fn lower_document(&mut self, schema: &Value, tool_name: &str, role: Role) -> ShapeId {
        let mut doc = Document {
            root: schema,
            plan: refs::plan(schema),
            aliases: BTreeMap::new(),
            pending: Vec::new(),
            tool_pascal: tool_pascal(tool_name),
            role,
        };
        let root = if doc.plan.cyclic.contains("") {
            let alias = self.alias_for(&mut doc, "", schema);
            self.push(Shape::Alias(alias))
        } else {
            self.lower_root(&mut doc, schema)
        };
        while let Some((alias, body)) = doc.pending.pop() {
            let shape = if doc.aliases.get("") == Some(&alias) {
                self.lower_root(&mut doc, body)
            } else {
                self.lower(&mut doc, body, 0)
            };
            if let Some(entry) = self.aliases.get_mut(alias) {
                entry.body = shape;
            }
        }
        root
    }

    fn lower_root<'a>(&mut self, doc: &mut Document<'a>, schema: &'a Value) -> ShapeId {
        match (doc.role, schema) {
            (Role::Args, Value::Object(map)) if implicit_object_root(map) => {
                self.lower_object(doc, map, 0)
            }
            (Role::Args, Value::Bool(true)) => self.push(Shape::Object(Object {
                properties: Vec::new(),
                rest: Rest::Open,
            })),
            _ => self.lower(doc, schema, 0),
        }
    }

    /// The alias of a named target, created (and its body queued) on first use.
    fn alias_for<'a>(
        &mut self,
        doc: &mut Document<'a>,
        pointer: &str,
        target: &'a Value,
    ) -> AliasId {
        if let Some(alias) = doc.aliases.get(pointer) {
            return *alias;
        }
        let suffix = match pointer.rsplit('/').next().map(pascal_case) {
            Some(last) if !pointer.is_empty() && !last.is_empty() => last,
            _ if doc.role == Role::Args => "Args".to_owned(),
            _ => "Output".to_owned(),
        };
        let name = self.unique_name(&format!("{}{}", doc.tool_pascal, suffix));
        let placeholder = self.push(Shape::Unknown);
        self.aliases.push(Alias {
            name,
            body: placeholder,
        });
        let alias = self.aliases.len() - 1;
        doc.aliases.insert(pointer.to_owned(), alias);
        doc.pending.push((alias, target));
        alias
    }

    /// `base`, or `base2`, `base3`, … whichever is free first.
    fn unique_name(&mut self, base: &str) -> String {
        crate::text::unique_name(&mut self.taken_names, base)
    }

    /// Lowers one schema node at nesting `depth`.
    fn lower<'a>(&mut self, doc: &mut Document<'a>, node: &'a Value, depth: usize) -> ShapeId {
        if depth > MAX_DEPTH {
            return self.push(Shape::Unknown);
        }
        let map = match node {
            Value::Bool(true) => return self.push(Shape::Json),
            Value::Bool(false) => return self.push(Shape::Never),
            Value::Object(map) => map,
            _ => return self.push(Shape::Unknown),
        };
        if INEXPRESSIBLE.iter().any(|k| map.contains_key(*k)) {
            return self.push(Shape::Unknown);
        }

        let mut parts: Vec<ShapeId> = Vec::new();
        if let Some(reference) = map.get("$ref") {
            parts.push(self.lower_ref(doc, reference, depth));
        }
        if let Some(base) = self.lower_base(doc, map, depth) {
            parts.push(base);
        }
        for key in ["anyOf", "oneOf"] {
            if let Some(branches) = map.get(key) {
                parts.push(self.lower_union(doc, branches, depth));
            }
        }
        if let Some(members) = map.get("allOf") {
            match members {
                Value::Array(list) if !list.is_empty() => {
                    for member in list {
                        parts.push(self.lower(doc, member, depth + 1));
                    }
                }
                _ => parts.push(self.push(Shape::Unknown)),
            }
        }
        let combined = self.intersect(parts);
        if map.get("nullable") == Some(&Value::Bool(true)) {
            let null = self.push(Shape::Null);
            return self.union(vec![combined, null]);
        }
        combined
    }

    fn lower_ref<'a>(
        &mut self,
        doc: &mut Document<'a>,
        reference: &Value,
        depth: usize,
    ) -> ShapeId {
        let Value::String(reference) = reference else {
            return self.push(Shape::Unknown);
        };
        let Some((pointer, target)) = refs::resolve(doc.root, reference) else {
            return self.push(Shape::Unknown);
        };
        if doc.plan.names(&pointer, target) {
            let alias = self.alias_for(doc, &pointer, target);
            self.push(Shape::Alias(alias))
        } else {
            // Used once and not recursive: inlining terminates and prints it once.
            self.lower(doc, target, depth + 1)
        }
    }

    /// The part of a node given by `enum`/`const`/`type` and the keywords of its type;
    /// `None` when the node does not constrain its type that way.
    fn lower_base<'a>(
        &mut self,
        doc: &mut Document<'a>,
        map: &'a Map<String, Value>,
        depth: usize,
    ) -> Option<ShapeId> {
        let types: Option<Vec<&str>> = match map.get("type") {
            None => None,
            Some(Value::String(t)) => Some(vec![t.as_str()]),
            Some(Value::Array(list)) if !list.is_empty() => {
                let mut names = Vec::with_capacity(list.len());
                for t in list {
                    match t {
                        Value::String(t) => names.push(t.as_str()),
                        _ => return Some(self.push(Shape::Unknown)),
                    }
                }
                Some(names)
            }
            Some(_) => return Some(self.push(Shape::Unknown)),
        };

        if let Some(value) = map.get("const") {
            return Some(self.lower_literals(std::slice::from_ref(value), types.as_deref()));
        }
        if let Some(values) = map.get("enum") {
            return Some(match values {
                Value::Array(list) => self.lower_literals(list, types.as_deref()),
                _ => self.push(Shape::Unknown),
            });
        }

        let types = match types {
            Some(types) => types,
            None if OBJECT_KEYWORDS.iter().any(|k| map.contains_key(*k)) => vec!["object"],
            None if map.contains_key("items") => vec!["array"],
            None => return None,
        };
        let mut members = Vec::with_capacity(types.len());
        for t in types {
            let shape = match t {
                "string" => self.push(Shape::String),
                "number" => self.push(Shape::Number),
                "integer" => self.push(Shape::Integer),
                "boolean" => self.push(Shape::Boolean),
                "null" => self.push(Shape::Null),
                "array" => self.lower_array(doc, map, depth),
                "object" => self.lower_object(doc, map, depth),
                _ => self.push(Shape::Unknown),
            };
            members.push(shape);
        }
        Some(self.union(members))
    }

    /// `enum`/`const` values, keeping those of the declared type(s); non-scalars or nothing left
    /// make it `Unknown`.
    fn lower_literals(&mut self, values: &[Value], types: Option<&[&str]>) -> ShapeId {
        let mut kept = Vec::with_capacity(values.len());
        for value in values {
            if matches!(value, Value::Array(_) | Value::Object(_)) {
                return self.push(Shape::Unknown);
            }
            let fits = match types {
                None => true,
                Some(types) => types.iter().any(|t| literal_fits(value, t)),
            };
            if fits {
                kept.push(value.clone());
            }
        }
        if kept.is_empty() {
            return self.push(Shape::Unknown);
        }
        self.push(Shape::Literals(kept))
    }

    fn lower_array<'a>(
        &mut self,
        doc: &mut Document<'a>,
        map: &'a Map<String, Value>,
        depth: usize,
    ) -> ShapeId {
        match map.get("items") {
            None | Some(Value::Array(_)) | Some(Value::Bool(true)) => self.push(Shape::Array(None)),
            Some(items @ (Value::Object(_) | Value::Bool(false))) => {
                let item = self.lower(doc, items, depth + 1);
                let item = if self.get(item) == &Shape::Json {
                    None
                } else {
                    Some(item)
                };
                self.push(Shape::Array(item))
            }
            Some(_) => self.push(Shape::Unknown),
        }
    }

    fn lower_object<'a>(
        &mut self,
        doc: &mut Document<'a>,
        map: &'a Map<String, Value>,
        depth: usize,
    ) -> ShapeId {
        let declared = match map.get("properties") {
            None => None,
            Some(Value::Object(props)) => Some(props),
            Some(_) => return self.push(Shape::Unknown),
        };
        let mut required: BTreeSet<&str> = BTreeSet::new();
        match map.get("required") {
            None => {}
            Some(Value::Array(list)) => {
                for key in list {
                    match key {
                        Value::String(key) => {
                            required.insert(key.as_str());
                        }
                        _ => return self.push(Shape::Unknown),
                    }
                }
            }
            Some(_) => return self.push(Shape::Unknown),
        }

        let mut properties = Vec::new();
        if let Some(declared) = declared {
            // Lowered in sorted order (not map order), so alias and class names, which are
            // handed out in lowering order, do not depend on how the input ordered its keys.
            let mut sorted: Vec<(&String, &Value)> = declared.iter().collect();
            sorted.sort_by(|a, b| cmp_utf16(a.0, b.0));
            for (key, schema) in sorted {
                let doc_line = property_doc(schema, doc.root);
                let shape = self.lower(doc, schema, depth + 1);
                properties.push(Property {
                    key: key.clone(),
                    required: required.contains(key.as_str()),
                    doc: doc_line,
                    shape,
                });
            }
        }
        // A required key without a schema must be present with any value.
        for key in required {
            if !declared.is_some_and(|d| d.contains_key(key)) {
                let shape = self.push(Shape::Json);
                properties.push(Property {
                    key: key.to_owned(),
                    required: true,
                    doc: None,
                    shape,
                });
            }
        }
        properties.sort_by(|a, b| cmp_utf16(&a.key, &b.key));

        let rest = match map.get("additionalProperties") {
            // Pattern properties still admit keys beyond the declared ones.
            Some(Value::Bool(false)) if !map.contains_key("patternProperties") => Rest::Closed,
            None if !map.contains_key("patternProperties") => Rest::Unstated,
            None | Some(Value::Bool(_)) => Rest::Open,
            Some(schema @ Value::Object(_)) => {
                let shape = self.lower(doc, schema, depth + 1);
                if self.get(shape) == &Shape::Json || map.contains_key("patternProperties") {
                    Rest::Open
                } else {
                    Rest::Typed(shape)
                }
            }
            Some(_) => return self.push(Shape::Unknown),
        };
        self.push(Shape::Object(Object { properties, rest }))
    }

    /// `anyOf`/`oneOf`: a flat union. Branches that are themselves only a union are spliced in
    /// with a work list, so a chain thousands of levels deep neither recurses nor nests.
    fn lower_union<'a>(
        &mut self,
        doc: &mut Document<'a>,
        branches: &'a Value,
        depth: usize,
    ) -> ShapeId {
        let Value::Array(list) = branches else {
            return self.push(Shape::Unknown);
        };
        if list.is_empty() {
            return self.push(Shape::Unknown);
        }
        let mut work: Vec<&Value> = list.iter().rev().collect();
        let mut members = Vec::new();
        while let Some(branch) = work.pop() {
            if let Some(inner) = only_a_union(branch) {
                work.extend(inner.iter().rev());
                continue;
            }
            members.push(self.lower(doc, branch, depth + 1));
        }
        self.union(members)
    }

    /// A union of `members`; any `Json` member makes the whole union `Json`.
    fn union(&mut self, members: Vec<ShapeId>) -> ShapeId {
        let mut flat = Vec::with_capacity(members.len());
        for member in members {
            match self.get(member) {
                Shape::Json => return self.push(Shape::Json),
                Shape::Union(inner) => flat.extend(inner.iter().copied()),
                _ => flat.push(member),
            }
        }
        match flat.as_slice() {
            [] => self.push(Shape::Unknown),
            [single] => *single,
            _ => self.push(Shape::Union(flat)),
        }
    }

    /// An intersection of `parts`; `Json` parts add nothing and are dropped.
    fn intersect(&mut self, parts: Vec<ShapeId>) -> ShapeId {
        let mut kept = Vec::with_capacity(parts.len());
        for part in parts {
            match self.get(part) {
                Shape::Json => {}
                Shape::Intersection(inner) => kept.extend(inner.iter().copied()),
                _ => kept.push(part),
            }
        }
        match kept.as_slice() {
            [] => self.push(Shape::Json),
            [single] => *single,
            _ => self.push(Shape::Intersection(kept)),
        }
    }
}

/// Keywords whose meaning no static type can carry.
const INEXPRESSIBLE: [&str; 6] = ["not", "if", "then", "else", "$dynamicRef", "$recursiveRef"];

/// Keywords that make a node without `type` an object.
const OBJECT_KEYWORDS: [&str; 4] = [
    "properties",
    "required",
    "additionalProperties",
    "patternProperties",
];

/// Annotation-only keywords: a node with nothing else constrains nothing.
const ANNOTATIONS: [&str; 16] = [
    "$schema",
    "$id",
    "$comment",
    "$anchor",
    "title",
    "description",
    "default",
    "examples",
    "deprecated",
    "readOnly",
    "writeOnly",
    "format",
    "$defs",
    "definitions",
    "contentMediaType",
    "contentEncoding",
];

/// The branches of a node that is nothing but one `anyOf` or `oneOf` (plus annotations).
fn only_a_union(node: &Value) -> Option<&Vec<Value>> {
    let Value::Object(map) = node else {
        return None;
    };
    let mut union = None;
    for (key, value) in map {
        match key.as_str() {
            "anyOf" | "oneOf" if union.is_none() => match value {
                Value::Array(list) if !list.is_empty() => union = Some(list),
                _ => return None,
            },
            key if ANNOTATIONS.contains(&key) => {}
            _ => return None,
        }
    }
    union
}

/// A parameter root with no `type` of its own is the implicit open object of the reference.
fn implicit_object_root(map: &Map<String, Value>) -> bool {
    !map.contains_key("type")
        && !["$ref", "anyOf", "oneOf", "allOf", "enum", "const", "items"]
            .iter()
            .any(|k| map.contains_key(*k))
}

fn literal_fits(value: &Value, json_type: &str) -> bool {
    match (value, json_type) {
        (Value::String(_), "string") | (Value::Bool(_), "boolean") | (Value::Null, "null") => true,
        (Value::Number(_), "number") => true,
        (Value::Number(n), "integer") => {
            n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0)
        }
        _ => false,
    }
}

/// The PascalCase stem of a tool's names: `Tool`-prefixed when it would not start with a letter.
pub fn tool_pascal(tool_name: &str) -> String {
    let pascal = pascal_case(tool_name);
    match pascal.chars().next() {
        Some(c) if c.is_alphabetic() => pascal,
        _ => format!("Tool{pascal}"),
    }
}
