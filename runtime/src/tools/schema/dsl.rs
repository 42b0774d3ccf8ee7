//! The author DSL: typed builders that compile to the enforced subset.
//!
//! ```
//! use codemode_runtime::tools::schema::dsl::*;
//! use codemode_runtime::tools::Schema;
//!
//! let params = Parameters::new()
//!     .required("path", string().description("Absolute file path"))
//!     .optional("mode", string().enum_values(["text", "bytes"]))
//!     .optional("limit", integer());
//! let schema = Schema::parameters(params).unwrap();
//! assert_eq!(schema.json()["required"], serde_json::json!(["path"]));
//! ```
//!
//! Type-correct `enum`/`const` are enforced by the types; explicit objects must say whether they
//! are open ([`object`] takes `additional_properties`); [`one_of`] takes at least two branches.
//! `required` exists only on property maps. Compilation is iterative.

use std::marker::PhantomData;

use serde_json::{Map, Number, Value};

/// Annotations every node may carry; they never affect validation (defaults are not applied).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Annotations {
    /// The node's `description`.
    pub description: Option<String>,
    /// The node's `title`.
    pub title: Option<String>,
    /// The node's documentation-only `default`.
    pub default: Option<Value>,
    /// The node's `examples`.
    pub examples: Option<Value>,
}

/// Builder methods shared by every node type.
pub trait Annotate: Sized {
    /// The node's annotations, for the builder methods to fill in.
    fn annotations_mut(&mut self) -> &mut Annotations;

    /// Sets the node's `description`.
    fn description(mut self, text: impl Into<String>) -> Self {
        self.annotations_mut().description = Some(text.into());
        self
    }

    /// Sets the node's `title`.
    fn title(mut self, text: impl Into<String>) -> Self {
        self.annotations_mut().title = Some(text.into());
        self
    }

    /// A documentation-only default: validation never fills it in.
    fn default_value(mut self, value: Value) -> Self {
        self.annotations_mut().default = Some(value);
        self
    }

    /// Sets the node's `examples`, documentation only like the other annotations.
    fn examples(mut self, value: Value) -> Self {
        self.annotations_mut().examples = Some(value);
        self
    }
}

/// Any compiled-to-be node; build one with the functions of this module.
#[derive(Clone, Debug, PartialEq)]
pub struct ValueSpec {
    kind: Kind,
    annotations: Annotations,
}

#[derive(Clone, Debug, PartialEq)]
enum Kind {
    Scalar {
        type_name: &'static str,
        enum_values: Option<Vec<Value>>,
        constant: Option<Value>,
    },
    Array {
        items: Option<Box<ValueSpec>>,
    },
    Object {
        properties: Option<Parameters>,
        additional_properties: bool,
    },
    Json,
    OneOf(Vec<ValueSpec>),
}

/// Dropping is iterative: a deeply nested spec must not recurse once per level.
impl Drop for ValueSpec {
    fn drop(&mut self) {
        let mut pending = take_children(&mut self.kind);
        while let Some(mut spec) = pending.pop() {
            pending.extend(take_children(&mut spec.kind));
        }
    }
}

fn take_children(kind: &mut Kind) -> Vec<ValueSpec> {
    match kind {
        Kind::Array { items } => items.take().map(|b| vec![*b]).unwrap_or_default(),
        Kind::Object { properties, .. } => properties
            .take()
            .map(|p| p.entries.into_iter().map(|(_, spec, _)| spec).collect())
            .unwrap_or_default(),
        Kind::OneOf(branches) => std::mem::take(branches),
        _ => Vec::new(),
    }
}

impl Annotate for ValueSpec {
    fn annotations_mut(&mut self) -> &mut Annotations {
        &mut self.annotations
    }
}

impl ValueSpec {
    fn new(kind: Kind) -> Self {
        Self {
            kind,
            annotations: Annotations::default(),
        }
    }
}

/// The JSON scalar types, tying each to the Rust type its `enum`/`const` literals must have.
pub trait ScalarType {
    /// The Rust type of this scalar's `enum`/`const` literals.
    type Literal;
    /// The JSON Schema `type` name.
    const NAME: &'static str;
    /// The literal as a JSON value.
    fn literal(value: Self::Literal) -> Value;
}

/// JSON strings; literals are `String`s.
pub struct StringType;
/// Finite JSON numbers; literals are `f64`s.
pub struct NumberType;
/// JSON integers; literals are `i64`s.
pub struct IntegerType;
/// JSON booleans; literals are `bool`s.
pub struct BooleanType;
/// JSON `null`; its only literal is `()`.
pub struct NullType;

impl ScalarType for StringType {
    type Literal = String;
    const NAME: &'static str = "string";
    fn literal(value: String) -> Value {
        Value::String(value)
    }
}

impl ScalarType for NumberType {
    type Literal = f64;
    const NAME: &'static str = "number";
    fn literal(value: f64) -> Value {
        // A non-finite literal has no JSON form; `null` makes the subset check reject it.
        Number::from_f64(value).map_or(Value::Null, Value::Number)
    }
}

impl ScalarType for IntegerType {
    type Literal = i64;
    const NAME: &'static str = "integer";
    fn literal(value: i64) -> Value {
        Value::from(value)
    }
}

impl ScalarType for BooleanType {
    type Literal = bool;
    const NAME: &'static str = "boolean";
    fn literal(value: bool) -> Value {
        Value::Bool(value)
    }
}

impl ScalarType for NullType {
    type Literal = ();
    const NAME: &'static str = "null";
    fn literal(_: ()) -> Value {
        Value::Null
    }
}

/// A scalar node of type `T`.
#[derive(Clone, Debug, PartialEq)]
pub struct Scalar<T> {
    spec: ValueSpec,
    _type: PhantomData<fn() -> T>,
}

impl<T: ScalarType> Scalar<T> {
    fn new() -> Self {
        Self {
            spec: ValueSpec::new(Kind::Scalar {
                type_name: T::NAME,
                enum_values: None,
                constant: None,
            }),
            _type: PhantomData,
        }
    }

    /// Restricts the node to these literals (must be non-empty).
    pub fn enum_values<I>(mut self, values: I) -> Self
    where
        I: IntoIterator,
        I::Item: Into<T::Literal>,
    {
        if let Kind::Scalar { enum_values, .. } = &mut self.spec.kind {
            *enum_values = Some(values.into_iter().map(|v| T::literal(v.into())).collect());
        }
        self
    }

    /// Restricts the node to exactly this literal.
    pub fn constant(mut self, value: impl Into<T::Literal>) -> Self {
        if let Kind::Scalar { constant, .. } = &mut self.spec.kind {
            *constant = Some(T::literal(value.into()));
        }
        self
    }
}

impl<T> Annotate for Scalar<T> {
    fn annotations_mut(&mut self) -> &mut Annotations {
        &mut self.spec.annotations
    }
}

impl<T> From<Scalar<T>> for ValueSpec {
    fn from(scalar: Scalar<T>) -> Self {
        scalar.spec
    }
}

/// A JSON string.
pub fn string() -> Scalar<StringType> {
    Scalar::new()
}

/// A finite JSON number.
pub fn number() -> Scalar<NumberType> {
    Scalar::new()
}

/// A JSON integer.
pub fn integer() -> Scalar<IntegerType> {
    Scalar::new()
}

/// A JSON boolean.
pub fn boolean() -> Scalar<BooleanType> {
    Scalar::new()
}

/// JSON `null`.
pub fn null() -> Scalar<NullType> {
    Scalar::new()
}

/// An array whose items match `items`.
pub fn array(items: impl Into<ValueSpec>) -> ValueSpec {
    ValueSpec::new(Kind::Array {
        items: Some(Box::new(items.into())),
    })
}

/// An array of any lossless JSON items.
pub fn array_of_any() -> ValueSpec {
    ValueSpec::new(Kind::Array { items: None })
}

/// Any lossless JSON value (compiles to an annotation-only schema).
pub fn json() -> ValueSpec {
    ValueSpec::new(Kind::Json)
}

/// An explicit object; `additional_properties` says whether undeclared keys are accepted.
pub fn object(additional_properties: bool) -> ObjectSpec {
    ObjectSpec {
        properties: Parameters::new(),
        declared: false,
        spec_annotations: Annotations::default(),
        additional_properties,
    }
}

/// An explicit object node under construction.
#[derive(Clone, Debug, PartialEq)]
pub struct ObjectSpec {
    properties: Parameters,
    declared: bool,
    spec_annotations: Annotations,
    additional_properties: bool,
}

impl ObjectSpec {
    /// Declares a property the object must have. Re-declaring a name replaces it.
    pub fn required(mut self, name: impl Into<String>, spec: impl Into<ValueSpec>) -> Self {
        self.properties = self.properties.required(name, spec);
        self.declared = true;
        self
    }

    /// Declares a property the object may have. Re-declaring a name replaces it.
    pub fn optional(mut self, name: impl Into<String>, spec: impl Into<ValueSpec>) -> Self {
        self.properties = self.properties.optional(name, spec);
        self.declared = true;
        self
    }
}

impl Annotate for ObjectSpec {
    fn annotations_mut(&mut self) -> &mut Annotations {
        &mut self.spec_annotations
    }
}

impl From<ObjectSpec> for ValueSpec {
    fn from(object: ObjectSpec) -> Self {
        ValueSpec {
            kind: Kind::Object {
                properties: object.declared.then_some(object.properties),
                additional_properties: object.additional_properties,
            },
            annotations: object.spec_annotations,
        }
    }
}

/// Exactly one of at least two branches; add more with [`OneOfSpec::or`].
pub fn one_of(first: impl Into<ValueSpec>, second: impl Into<ValueSpec>) -> OneOfSpec {
    OneOfSpec {
        spec: ValueSpec::new(Kind::OneOf(vec![first.into(), second.into()])),
    }
}

/// A `oneOf` node under construction.
#[derive(Clone, Debug, PartialEq)]
pub struct OneOfSpec {
    spec: ValueSpec,
}

impl OneOfSpec {
    /// Adds another branch.
    pub fn or(mut self, branch: impl Into<ValueSpec>) -> Self {
        if let Kind::OneOf(branches) = &mut self.spec.kind {
            branches.push(branch.into());
        }
        self
    }
}

impl Annotate for OneOfSpec {
    fn annotations_mut(&mut self) -> &mut Annotations {
        &mut self.spec.annotations
    }
}

impl From<OneOfSpec> for ValueSpec {
    fn from(one_of: OneOfSpec) -> Self {
        one_of.spec
    }
}

/// A property map: the implicit open parameter root of a tool, or an object's properties.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Parameters {
    entries: Vec<(String, ValueSpec, bool)>,
}

impl Parameters {
    /// An empty property map.
    pub fn new() -> Self {
        Self::default()
    }

    /// A property the caller must supply. Re-declaring a name replaces it.
    pub fn required(self, name: impl Into<String>, spec: impl Into<ValueSpec>) -> Self {
        self.with(name.into(), spec.into(), true)
    }

    /// A property the caller may omit. Re-declaring a name replaces it.
    pub fn optional(self, name: impl Into<String>, spec: impl Into<ValueSpec>) -> Self {
        self.with(name.into(), spec.into(), false)
    }

    fn with(mut self, name: String, spec: ValueSpec, required: bool) -> Self {
        self.entries.retain(|(existing, _, _)| *existing != name);
        self.entries.push((name, spec, required));
        self
    }
}

enum Task<'a> {
    Enter(&'a ValueSpec),
    Build(&'a ValueSpec),
}

fn annotations_into(annotations: &Annotations, node: &mut Map<String, Value>) {
    if let Some(d) = &annotations.description {
        node.insert("description".into(), Value::String(d.clone()));
    }
    if let Some(t) = &annotations.title {
        node.insert("title".into(), Value::String(t.clone()));
    }
    if let Some(d) = &annotations.default {
        node.insert("default".into(), d.clone());
    }
    if let Some(e) = &annotations.examples {
        node.insert("examples".into(), e.clone());
    }
}

fn children(spec: &ValueSpec) -> Vec<&ValueSpec> {
    match &spec.kind {
        Kind::Array { items: Some(items) } => vec![items],
        Kind::Object {
            properties: Some(properties),
            ..
        } => properties.entries.iter().map(|(_, s, _)| s).collect(),
        Kind::OneOf(branches) => branches.iter().collect(),
        _ => Vec::new(),
    }
}

fn properties_into(properties: &Parameters, compiled: Vec<Value>, node: &mut Map<String, Value>) {
    let mut map = Map::new();
    let mut required = Vec::new();
    for ((name, _, is_required), schema) in properties.entries.iter().zip(compiled) {
        map.insert(name.clone(), schema);
        if *is_required {
            required.push(Value::String(name.clone()));
        }
    }
    node.insert("properties".into(), Value::Object(map));
    if !required.is_empty() {
        node.insert("required".into(), Value::Array(required));
    }
}

/// One compiled node. Key order follows the reference compiler (type, annotations, then the
/// type's own keywords; `oneOf` first for unions), so projected schemas serialize identically.
fn build(spec: &ValueSpec, compiled: Vec<Value>) -> Value {
    let mut node = Map::new();
    let type_name = match &spec.kind {
        Kind::Scalar { type_name, .. } => Some(*type_name),
        Kind::Array { .. } => Some("array"),
        Kind::Object { .. } => Some("object"),
        Kind::Json | Kind::OneOf(_) => None,
    };
    if let Some(type_name) = type_name {
        node.insert("type".into(), Value::String(type_name.into()));
    }
    if let Kind::OneOf(_) = &spec.kind {
        node.insert("oneOf".into(), Value::Array(Vec::new()));
    }
    annotations_into(&spec.annotations, &mut node);
    match &spec.kind {
        Kind::Scalar {
            enum_values,
            constant,
            ..
        } => {
            if let Some(values) = enum_values {
                node.insert("enum".into(), Value::Array(values.clone()));
            }
            if let Some(c) = constant {
                node.insert("const".into(), c.clone());
            }
        }
        Kind::Array { .. } => {
            if let Some(items) = compiled.into_iter().next() {
                node.insert("items".into(), items);
            }
        }
        Kind::Object {
            properties,
            additional_properties,
        } => {
            node.insert(
                "additionalProperties".into(),
                Value::Bool(*additional_properties),
            );
            if let Some(properties) = properties {
                properties_into(properties, compiled, &mut node);
            }
        }
        Kind::Json => {}
        Kind::OneOf(_) => {
            // Fills the slot reserved above, keeping `oneOf` ahead of the annotations.
            node.insert("oneOf".into(), Value::Array(compiled));
        }
    }
    Value::Object(node)
}

/// Compiles the DSL nodes of `roots` bottom-up with an explicit stack; returns one schema each.
fn compile_all(roots: &[&ValueSpec]) -> Vec<Value> {
    let mut tasks: Vec<Task<'_>> = roots.iter().rev().map(|r| Task::Enter(r)).collect();
    let mut results: Vec<Value> = Vec::new();
    while let Some(task) = tasks.pop() {
        match task {
            Task::Enter(spec) => {
                tasks.push(Task::Build(spec));
                tasks.extend(children(spec).into_iter().rev().map(Task::Enter));
            }
            Task::Build(spec) => {
                let count = children(spec).len();
                let compiled = results.split_off(results.len().saturating_sub(count));
                results.push(build(spec, compiled));
            }
        }
    }
    results
}

pub(super) fn compile_value(spec: &ValueSpec) -> Value {
    compile_all(&[spec]).pop().unwrap_or(Value::Null)
}

pub(super) fn compile_parameters(parameters: &Parameters) -> Value {
    let roots: Vec<&ValueSpec> = parameters.entries.iter().map(|(_, s, _)| s).collect();
    let compiled = compile_all(&roots);
    let mut node = Map::new();
    node.insert("type".into(), Value::String("object".into()));
    properties_into(parameters, compiled, &mut node);
    Value::Object(node)
}
