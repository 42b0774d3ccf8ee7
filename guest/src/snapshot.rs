//! Lossless JSON snapshots, walked natively into the outgoing JSON buffer.
//!
//! Accepts exactly the reference's lossless JSON: null, booleans, strings, finite numbers other
//! than -0, dense ordinary arrays (prototype `Array.prototype`), and ordinary objects whose
//! prototype is `Object.prototype` or null and whose own keys are all enumerable strings.
//! Shared acyclic references are copied; cycles, symbols, functions, proxies and other exotic
//! objects make the value not lossless. Each slot is read once with `[[Get]]`, so a getter runs
//! exactly once; a getter that throws makes the value not lossless, and an array whose length
//! changes while it is read is refused.
//!
//! The walk keeps its own stack of frames on the heap, so nesting depth costs no native stack
//! (the host bounds depth when it parses).

use std::cell::Cell;
use std::collections::HashSet;

use boa_engine::property::PropertyKey;
use boa_engine::{js_string, Context, JsError, JsObject, JsResult, JsString, JsValue};

use crate::json_out;

thread_local! {
    /// A getter that starts a binding call or completes the program from inside a snapshot
    /// would reuse the one buffer, so a nested snapshot is refused.
    static SNAPSHOTTING: Cell<bool> = const { Cell::new(false) };
}

/// Writes `value` as JSON into the outgoing buffer (after its reserved tag byte). `Ok(false)`
/// when the value is not lossless JSON; `Err` only for errors a program cannot catch (Boa's
/// runtime limits), which must keep unwinding.
pub fn write(value: &JsValue, context: &mut Context) -> JsResult<bool> {
    if SNAPSHOTTING.replace(true) {
        return Ok(false);
    }
    json_out::begin();
    let result = walk(value.clone(), context);
    SNAPSHOTTING.set(false);
    match result {
        Ok(lossless) => Ok(lossless),
        Err(error) if error.as_engine().is_none() => Ok(false),
        Err(error) => Err(error),
    }
}

/// An open container: its keys (objects) or its length (arrays), and the next slot to read.
struct Frame {
    object: JsObject,
    keys: Vec<JsString>,
    length: u32,
    is_array: bool,
    index: u32,
}

/// Containers on the path from the root: looked up in the frames themselves while the path is
/// short (most arguments nest a few levels), in a hash set once it is long.
#[derive(Default)]
struct Path {
    deep: Option<HashSet<JsObject>>,
}

/// Past this depth the path is indexed, so deep values cost linear rather than quadratic time.
const SHALLOW: usize = 32;

impl Path {
    fn contains(&self, frames: &[Frame], object: &JsObject) -> bool {
        match &self.deep {
            Some(set) => set.contains(object),
            None => frames.iter().any(|f| &f.object == object),
        }
    }

    fn entered(&mut self, frames: &[Frame]) {
        if let Some(set) = &mut self.deep {
            if let Some(frame) = frames.last() {
                set.insert(frame.object.clone());
            }
        } else if frames.len() > SHALLOW {
            self.deep = Some(frames.iter().map(|f| f.object.clone()).collect());
        }
    }

    fn left(&mut self, object: &JsObject) {
        if let Some(set) = &mut self.deep {
            set.remove(object);
        }
    }
}

fn walk(root: JsValue, context: &mut Context) -> Result<bool, JsError> {
    let mut on_path = Path::default();
    let mut frames: Vec<Frame> = Vec::new();
    let mut pending = root;
    loop {
        match pending.as_object() {
            None => {
                if !scalar(&pending) {
                    return Ok(false);
                }
            }
            Some(object) => {
                if on_path.contains(&frames, &object) {
                    return Ok(false);
                }
                let Some(frame) = open(&object, context)? else {
                    return Ok(false);
                };
                json_out::raw_bytes(if frame.is_array { b"[" } else { b"{" });
                frames.push(frame);
                on_path.entered(&frames);
            }
        }
        // Find the next slot to read, closing finished containers.
        let mut next = None;
        while let Some(frame) = frames.last_mut() {
            if frame.is_array {
                if frame.index < frame.length {
                    let i = frame.index;
                    frame.index += 1;
                    if i > 0 {
                        json_out::raw_bytes(b",");
                    }
                    let object = frame.object.clone();
                    let length = frame.length;
                    let value = object.get(i, context)?;
                    if array_length(&object) != Some(length) {
                        return Ok(false);
                    }
                    next = Some(value);
                    break;
                }
                json_out::raw_bytes(b"]");
            } else {
                if let Some(key) = frame.keys.get(frame.index as usize).cloned() {
                    if frame.index > 0 {
                        json_out::raw_bytes(b",");
                    }
                    frame.index += 1;
                    json_out::string(&key);
                    json_out::raw_bytes(b":");
                    let object = frame.object.clone();
                    next = Some(object.get(key, context)?);
                    break;
                }
                json_out::raw_bytes(b"}");
            }
            if let Some(done) = frames.pop() {
                on_path.left(&done.object);
            }
        }
        match next {
            Some(value) => pending = value,
            None => return Ok(true),
        }
    }
}

/// Writes a primitive; false for undefined, symbols, bigints and numbers JSON cannot carry.
fn scalar(value: &JsValue) -> bool {
    if value.is_null() {
        json_out::raw_bytes(b"null");
    } else if let Some(b) = value.as_boolean() {
        json_out::raw_bytes(if b { b"true" } else { b"false" });
    } else if let Some(s) = value.as_string() {
        json_out::string(&s);
    } else if let Some(n) = value.as_number() {
        if !n.is_finite() || (n == 0.0 && n.is_sign_negative()) {
            return false;
        }
        let mut buffer = ryu_js::Buffer::new();
        json_out::raw_bytes(buffer.format_finite(n).as_bytes());
    } else {
        return false;
    }
    true
}

/// The value of an array's own `length` data property.
fn array_length(object: &JsObject) -> Option<u32> {
    let length = object
        .borrow()
        .properties()
        .get(&PropertyKey::from(js_string!("length")))?;
    let n = length.value()?.as_number()?;
    (n >= 0.0 && n <= f64::from(u32::MAX) && n.fract() == 0.0).then_some(n as u32)
}

/// Checks that `object` is a plain object or a dense plain array and lists what to read.
fn open(object: &JsObject, context: &mut Context) -> JsResult<Option<Frame>> {
    if object.is_callable() {
        return Ok(None);
    }
    let intrinsics = context.intrinsics().constructors();
    let array_proto = intrinsics.array().prototype();
    let object_proto = intrinsics.object().prototype();
    if object.is_array() {
        if object.prototype().as_ref() != Some(&array_proto) {
            return Ok(None);
        }
        let Some(length) = array_length(object) else {
            return Ok(None);
        };
        // Own keys are the indices below `length` and `length` itself, nothing else: no holes,
        // no extra named properties.
        let keys = object.own_property_keys(context)?;
        if keys.len() != length as usize + 1 {
            return Ok(None);
        }
        for key in &keys {
            let fits = match key {
                PropertyKey::Index(i) => i.get() < length,
                PropertyKey::String(s) => s == &js_string!("length"),
                PropertyKey::Symbol(_) => false,
            };
            if !fits {
                return Ok(None);
            }
        }
        return Ok(Some(Frame {
            object: object.clone(),
            keys: Vec::new(),
            length,
            is_array: true,
            index: 0,
        }));
    }
    if !object.is_ordinary() {
        return Ok(None);
    }
    match object.prototype() {
        None => {}
        Some(proto) if proto == object_proto => {}
        Some(_) => return Ok(None),
    }
    let keys = object.own_property_keys(context)?;
    let mut names = Vec::with_capacity(keys.len());
    {
        let borrowed = object.borrow();
        let properties = borrowed.properties();
        for key in &keys {
            let name = match key {
                PropertyKey::String(s) => s.clone(),
                PropertyKey::Index(i) => JsString::from(i.get().to_string().as_str()),
                PropertyKey::Symbol(_) => return Ok(None),
            };
            match properties.get(key) {
                Some(descriptor) if descriptor.enumerable() == Some(true) => {}
                _ => return Ok(None),
            }
            names.push(name);
        }
    }
    Ok(Some(Frame {
        object: object.clone(),
        keys: names,
        length: 0,
        is_array: false,
        index: 0,
    }))
}
