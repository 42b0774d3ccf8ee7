//! An argument as written, checked against its JSON Schema wherever the literal alone decides.
//!
//! Only what cannot pass whatever the program's data is gets reported: a literal of a type
//! the schema's `type` excludes, a scalar literal outside its `enum` or `const`, a required
//! key absent from an object literal with no spread or computed key, a key a closed schema
//! does not declare (and, on an open one, a key so close to a declared one that it is almost
//! surely that one misspelled). A schema node with `$ref` is not followed, and composition
//! keywords are read only where they cannot widen what is allowed (`allOf`, `not`, `if` only
//! narrow, so they are ignored; `anyOf`/`oneOf` count only for their branches' types).
//! Messages use the run-time validator's words.

use std::borrow::Cow;

use serde_json::{Map, Value};
use swc_common::{Span, Spanned};
use swc_ecma_ast::{ArrayLit, Expr, Lit, ObjectLit, Prop, PropOrSpread, UnaryOp};

use codemode_runtime::tools::schema::{diagnostic_path, push_property};

use super::calls::{prop_name, static_string, unwrap};
use crate::explain::nearest;

/// One thing the argument gets wrong, at the node that shows it.
pub(super) struct Finding {
    pub span: Span,
    pub message: String,
}

/// Deepest literal nesting followed; deeper parts pass unchecked.
const MAX_DEPTH: usize = 64;

/// Checks `expr`, the whole argument, against `schema`.
pub(super) fn check(expr: &Expr, schema: &Value, out: &mut Vec<Finding>) {
    Checker { out }.value(expr, schema, Path::Arguments, 0);
}

/// A place in the arguments, written out only when a message names it.
#[derive(Clone, Copy)]
enum Path<'p> {
    Arguments,
    Key(&'p Path<'p>, &'p str),
    Index(&'p Path<'p>, usize),
}

impl Path<'_> {
    /// The validator's name for the place, quoted: `"arguments"`, `"a.b[0]"`.
    fn quoted(&self) -> String {
        format!("\"{}\"", diagnostic_path(&self.written()))
    }

    fn written(&self) -> String {
        match self {
            Self::Arguments => String::new(),
            Self::Key(parent, key) => {
                let mut path = parent.written();
                push_property(&mut path, key);
                path
            }
            Self::Index(parent, index) => format!("{}[{index}]", parent.written()),
        }
    }
}

/// What a literal is, as JSON will see it.
enum Shape<'a> {
    Str(Cow<'a, str>),
    Num(f64),
    Bool(bool),
    Null,
    Array(&'a ArrayLit),
    Object(&'a ObjectLit),
}

fn shape(expr: &Expr) -> Option<Shape<'_>> {
    let expr = unwrap(expr);
    if let Some(s) = static_string(expr) {
        return Some(Shape::Str(s));
    }
    Some(match expr {
        Expr::Lit(Lit::Num(n)) => Shape::Num(n.value),
        Expr::Lit(Lit::Bool(b)) => Shape::Bool(b.value),
        Expr::Lit(Lit::Null(_)) => Shape::Null,
        Expr::Unary(unary) if matches!(unary.op, UnaryOp::Minus | UnaryOp::Plus) => {
            let Expr::Lit(Lit::Num(n)) = unwrap(&unary.arg) else {
                return None;
            };
            Shape::Num(if unary.op == UnaryOp::Minus {
                -n.value
            } else {
                n.value
            })
        }
        Expr::Array(array) => Shape::Array(array),
        Expr::Object(object) => Shape::Object(object),
        _ => return None,
    })
    .filter(|shape| !matches!(shape, Shape::Num(n) if !n.is_finite()))
}

/// JSON Schema's primitive types, as bits.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Types(u8);

const NAMES: [(&str, &str); 7] = [
    ("string", "a string"),
    ("number", "a number"),
    ("integer", "an integer"),
    ("boolean", "a boolean"),
    ("null", "null"),
    ("array", "an array"),
    ("object", "an object"),
];

impl Types {
    fn named(name: &str) -> Option<Self> {
        NAMES
            .iter()
            .position(|(n, _)| *n == name)
            .map(|i| Self(1 << i))
    }

    fn has(self, name: &str) -> bool {
        Self::named(name).is_some_and(|t| self.0 & t.0 != 0)
    }

    fn accepts(self, shape: &Shape<'_>) -> bool {
        match shape {
            Shape::Str(_) => self.has("string"),
            Shape::Num(n) => self.has("number") || (self.has("integer") && n.fract() == 0.0),
            Shape::Bool(_) => self.has("boolean"),
            Shape::Null => self.has("null"),
            Shape::Array(_) => self.has("array"),
            Shape::Object(_) => self.has("object"),
        }
    }

    /// `a string`, `a string or null`, as the validator says it.
    fn describe(self) -> String {
        let names: Vec<&str> = NAMES
            .iter()
            .enumerate()
            .filter(|(i, _)| self.0 & (1 << i) != 0)
            .map(|(_, (_, article))| *article)
            .collect();
        names.join(" or ")
    }
}

/// The types a schema node allows, when it says (`type`, or the union of `anyOf`/`oneOf`
/// branches that each say); `None` allows anything.
fn allowed(node: &Map<String, Value>) -> Option<Types> {
    let mut types = match node.get("type") {
        Some(Value::String(name)) => Types::named(name)?,
        Some(Value::Array(names)) => {
            let mut all = Types(0);
            for name in names {
                all.0 |= Types::named(name.as_str()?)?.0;
            }
            all
        }
        Some(_) => return None,
        None => {
            let branches = node
                .get("anyOf")
                .or_else(|| node.get("oneOf"))?
                .as_array()?;
            let mut all = Types(0);
            for branch in branches {
                let branch = branch.as_object()?;
                if branch.contains_key("$ref") {
                    return None;
                }
                all.0 |= allowed(branch)?.0;
            }
            all
        }
    };
    // OpenAPI's spelling of "or null", which some validators honour.
    if node.get("nullable") == Some(&Value::Bool(true)) {
        types.0 |= Types::named("null")?.0;
    }
    Some(types)
}

/// `===` between a scalar literal and a JSON value.
fn equals(shape: &Shape<'_>, value: &Value) -> Option<bool> {
    Some(match shape {
        Shape::Str(s) => value.as_str() == Some(&**s),
        Shape::Num(n) => value.as_f64() == Some(*n),
        Shape::Bool(b) => value.as_bool() == Some(*b),
        Shape::Null => value.is_null(),
        Shape::Array(_) | Shape::Object(_) => return None,
    })
}

struct Checker<'o> {
    out: &'o mut Vec<Finding>,
}

impl Checker<'_> {
    fn report(&mut self, span: Span, message: String) {
        self.out.push(Finding { span, message });
    }

    fn value(&mut self, expr: &Expr, schema: &Value, path: Path<'_>, depth: usize) {
        let Some(node) = schema.as_object() else {
            return;
        };
        if node.contains_key("$ref") || depth > MAX_DEPTH {
            return;
        }
        let Some(shape) = shape(expr) else {
            return;
        };
        let span = unwrap(expr).span();
        if let Some(types) = allowed(node) {
            if !types.accepts(&shape) {
                let message = format!("{} must be {}", path.quoted(), types.describe());
                return self.report(span, message);
            }
        }
        if let Some(list @ Value::Array(entries)) = node.get("enum") {
            if !entries.is_empty() && entries.iter().all(|e| equals(&shape, e) == Some(false)) {
                let message = format!("{} must be one of {}", path.quoted(), compact(list));
                return self.report(span, message);
            }
        }
        if let Some(constant) = node.get("const") {
            if equals(&shape, constant) == Some(false) {
                let message = format!("{} must be {}", path.quoted(), compact(constant));
                return self.report(span, message);
            }
        }
        match shape {
            Shape::Object(object) => self.object(object, node, &path, depth),
            Shape::Array(array) => self.array(array, node, &path, depth),
            _ => {}
        }
    }

    fn array(
        &mut self,
        array: &ArrayLit,
        node: &Map<String, Value>,
        path: &Path<'_>,
        depth: usize,
    ) {
        let Some(items @ Value::Object(_)) = node.get("items") else {
            return;
        };
        for (index, element) in array.elems.iter().enumerate() {
            let Some(element) = element else {
                // A hole is `null` in JSON; not worth a message of its own.
                continue;
            };
            if element.spread.is_some() {
                // Later elements' indexes are no longer known.
                return;
            }
            self.value(&element.expr, items, Path::Index(path, index), depth + 1);
        }
    }

    fn object(
        &mut self,
        object: &ObjectLit,
        node: &Map<String, Value>,
        path: &Path<'_>,
        depth: usize,
    ) {
        let declared = node.get("properties").and_then(Value::as_object);
        // Keys written, with where and what; `complete` stays true while every key is known.
        let mut written: Vec<(Cow<'_, str>, Span, Option<&Expr>)> = Vec::new();
        let mut complete = true;
        for prop in &object.props {
            let PropOrSpread::Prop(prop) = prop else {
                complete = false;
                continue;
            };
            let (key, span, value) = match &**prop {
                Prop::KeyValue(kv) => (prop_name(&kv.key), kv.key.span(), Some(&*kv.value)),
                Prop::Shorthand(id) => (Some(Cow::Borrowed(&*id.sym)), id.span, None),
                Prop::Method(m) => (prop_name(&m.key), m.key.span(), None),
                Prop::Getter(g) => (prop_name(&g.key), g.key.span(), None),
                Prop::Setter(s) => (prop_name(&s.key), s.key.span(), None),
                Prop::Assign(_) => (None, prop.span(), None),
            };
            match key {
                Some(key) => written.push((key, span, value)),
                None => complete = false,
            }
        }
        let has = |key: &str| written.iter().any(|(k, ..)| k == key);
        let closed = node.get("additionalProperties") == Some(&Value::Bool(false))
            && !node.contains_key("patternProperties");
        let open_to_anything = node.contains_key("patternProperties")
            || node
                .get("additionalProperties")
                .is_some_and(|a| a.is_object() || a == &Value::Bool(true));
        // The declared keys not written, the candidates for a misspelling: listed only when a
        // key is not declared (most arguments have none).
        let mut unwritten: Option<Vec<String>> = None;
        // Keys a misspelling stands for: not reported missing as well.
        let mut meant: Vec<String> = Vec::new();
        for (key, span, _) in &written {
            if declared.is_some_and(|d| d.contains_key(&**key)) {
                continue;
            }
            let names = unwritten.get_or_insert_with(|| {
                declared
                    .map(|d| d.keys().filter(|k| !has(k)).cloned().collect())
                    .unwrap_or_default()
            });
            if closed {
                let near = nearest::nearest(key, names, 1);
                let mut message = format!(
                    "{} is not a declared property (additionalProperties: false)",
                    Path::Key(path, key).quoted()
                );
                if let Some(near) = near.first() {
                    message.push_str(&format!("; did you mean \"{near}\"?"));
                    meant.push((*near).to_owned());
                }
                self.report(*span, message);
            } else if !open_to_anything {
                if let Some(near) = misspelled(key, names) {
                    let message = format!(
                        "{} is not declared; did you mean \"{near}\"?",
                        Path::Key(path, key).quoted()
                    );
                    meant.push(near.to_owned());
                    self.report(*span, message);
                }
            }
        }
        if complete {
            let required = node.get("required").and_then(Value::as_array);
            for key in required.into_iter().flatten().filter_map(Value::as_str) {
                if !has(key) && !meant.iter().any(|m| m == key) {
                    let message = format!(
                        "missing required property {}",
                        Path::Key(path, key).quoted()
                    );
                    self.report(object.span, message);
                }
            }
        }
        let Some(declared) = declared else {
            return;
        };
        for (key, _, value) in &written {
            if let (Some(schema), Some(value)) = (declared.get(&**key), value) {
                self.value(value, schema, Path::Key(path, key), depth + 1);
            }
        }
    }
}

/// The declared name `key` is almost surely a misspelling of: within edit distance 2 and a
/// third of the key's length, closest first.
fn misspelled<'a>(key: &str, declared: &'a [String]) -> Option<&'a str> {
    let length = key.chars().count();
    let limit = (length / 3).min(2);
    declared
        .iter()
        .map(|name| (nearest::distance(key, name), name))
        .filter(|(d, _)| *d > 0 && *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, name)| name.as_str())
}

fn compact(value: &Value) -> String {
    serde_json::to_string(value).unwrap_or_default()
}
