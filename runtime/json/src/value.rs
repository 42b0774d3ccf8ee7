//! Checks and walks over values of any depth, with no recursion.

use serde_json::{Map, Number, Value};

use crate::MAX_DEPTH;

/// Whether `value` may cross a boundary: no `-0`, no non-finite numbers (serde_json cannot
/// hold them anyway), nesting within [`MAX_DEPTH`]. Iterative.
pub fn is_lossless(value: &Value) -> bool {
    walk(value, |node, depth| match node {
        Value::Number(n) => is_lossless_number(n),
        Value::Array(_) | Value::Object(_) => depth < MAX_DEPTH,
        _ => true,
    })
}

/// Visits every node of `value` (and, for an object, every value, not its keys) depth first
/// with its depth (0 at the root), stopping as soon as `visit` returns false; returns whether
/// it never did. No recursion, and the work stack holds one iterator per open container, so it
/// is as deep as the value rather than as wide (a stack of pending elements would hold a
/// pointer to every element of a wide array).
pub fn walk<'a>(value: &'a Value, mut visit: impl FnMut(&'a Value, usize) -> bool) -> bool {
    enum Children<'a> {
        Array(std::slice::Iter<'a, Value>),
        Object(serde_json::map::Values<'a>),
    }
    let mut stack: Vec<Children<'a>> = Vec::new();
    let mut next = Some(value);
    while let Some(node) = next.take() {
        if !visit(node, stack.len()) {
            return false;
        }
        match node {
            Value::Array(items) if !items.is_empty() => stack.push(Children::Array(items.iter())),
            Value::Object(map) if !map.is_empty() => stack.push(Children::Object(map.values())),
            _ => {}
        }
        while let Some(top) = stack.last_mut() {
            let child = match top {
                Children::Array(items) => items.next(),
                Children::Object(values) => values.next(),
            };
            if child.is_some() {
                next = child;
                break;
            }
            stack.pop();
        }
    }
    true
}

/// Clones a value of any depth without recursion.
pub fn clone_deep(value: &Value) -> Value {
    enum Build<'a> {
        Array(std::slice::Iter<'a, Value>, Vec<Value>),
        Object(
            serde_json::map::Iter<'a>,
            Map<String, Value>,
            Option<String>,
        ),
    }
    let mut stack: Vec<Build<'_>> = Vec::new();
    let mut next = Some(value);
    loop {
        let mut done = match next.take() {
            Some(Value::Array(items)) => {
                stack.push(Build::Array(items.iter(), Vec::with_capacity(items.len())));
                None
            }
            Some(Value::Object(map)) => {
                stack.push(Build::Object(map.iter(), Map::new(), None));
                None
            }
            Some(scalar) => Some(scalar.clone()),
            None => None,
        };
        loop {
            let Some(top) = stack.last_mut() else {
                return done.unwrap_or(Value::Null);
            };
            match top {
                Build::Array(items, out) => {
                    if let Some(v) = done.take() {
                        out.push(v);
                    }
                    if let Some(item) = items.next() {
                        next = Some(item);
                        break;
                    }
                }
                Build::Object(entries, out, key) => {
                    if let (Some(v), Some(k)) = (done.take(), key.take()) {
                        out.insert(k, v);
                    }
                    if let Some((k, item)) = entries.next() {
                        *key = Some(k.clone());
                        next = Some(item);
                        break;
                    }
                }
            }
            done = match stack.pop() {
                Some(Build::Array(_, out)) => Some(Value::Array(out)),
                Some(Build::Object(_, out, _)) => Some(Value::Object(out)),
                None => None,
            };
        }
    }
}

/// Drops a value of any depth without recursion, and without a second copy of its elements:
/// containers are emptied one element at a time, and only a container nested inside another
/// goes on a stack (so the stack is as deep as the value, and a value with no nested
/// containers needs none).
pub fn drop_deep(value: Value) {
    enum Emptying {
        Array(std::vec::IntoIter<Value>),
        Object(serde_json::map::IntoIter),
    }
    let mut current = match value {
        Value::Array(items) => Emptying::Array(items.into_iter()),
        Value::Object(map) => Emptying::Object(map.into_iter()),
        _ => return,
    };
    let mut stack: Vec<Emptying> = Vec::new();
    loop {
        let child = match &mut current {
            Emptying::Array(items) => items.next(),
            Emptying::Object(entries) => entries.next().map(|(_, v)| v),
        };
        match child {
            Some(Value::Array(items)) if !items.is_empty() => {
                stack.push(std::mem::replace(
                    &mut current,
                    Emptying::Array(items.into_iter()),
                ));
            }
            Some(Value::Object(map)) if !map.is_empty() => {
                stack.push(std::mem::replace(
                    &mut current,
                    Emptying::Object(map.into_iter()),
                ));
            }
            // A scalar or an empty container is dropped here.
            Some(_) => {}
            None => match stack.pop() {
                Some(parent) => current = parent,
                None => return,
            },
        }
    }
}

/// Whether a number is lossless: finite (always true of a `serde_json` number) and not `-0`.
pub fn is_lossless_number(number: &Number) -> bool {
    number
        .as_f64()
        .is_none_or(|f| f.is_finite() && !(f == 0.0 && f.is_sign_negative() && number.is_f64()))
}

/// Scalar equality as JavaScript's `===` sees JSON scalars: numbers compare as the doubles a
/// program holds (so two integers beyond 2^53 that round to one double are equal), everything
/// else structurally.
pub fn scalar_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        _ => a == b,
    }
}
