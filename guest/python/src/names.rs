//! The names a program is given: one host object per binding namespace (`tools`), whose
//! members are external functions, and the namespace's error class (`ToolCallError`).
//!
//! A member is reached as an attribute (`tools.search`) or by subscript for a name that is
//! not an identifier (`tools["mcp__fs__write-file"]`); either way it is an external function
//! named `<global>.<member>`, so calling it suspends Monty with that name. A missing member
//! is an `AttributeError` worded as CPython words it.

use monty_types::{CallArgs, ExcData, ExcType, MontyException, MontyObject, MontyType, MontyUuid};

use crate::json;

struct Namespace {
    global: String,
    /// The class name tracebacks give the namespace object (`Tools` for `tools`).
    class: String,
    /// Member names, in order, and the call frame header of each.
    members: Vec<(String, Vec<u8>)>,
    error_class: Option<String>,
}

pub struct Namespaces {
    list: Vec<Namespace>,
}

/// Uuids of the namespace objects (instances count from here, their classes from `CLASSES`).
const INSTANCES: u128 = 0x636f_6465_6d6f_6465_0000_0001_0000_0000;
const CLASSES: u128 = 0x636f_6465_6d6f_6465_0000_0002_0000_0000;

impl Namespaces {
    pub fn new(boot: &codemode_wire::Boot<'_>) -> Self {
        let list = boot
            .namespaces
            .iter()
            .map(|ns| Namespace {
                global: ns.global.to_owned(),
                class: class_name(ns.global),
                members: ns
                    .names
                    .iter()
                    .map(|name| {
                        (
                            (*name).to_owned(),
                            codemode_wire::call_header(ns.global, name),
                        )
                    })
                    .collect(),
                error_class: ns.error_class.map(|(class, _)| class.to_owned()),
            })
            .collect();
        Self { list }
    }

    /// The program's inputs: each namespace object, then each error class, by name.
    pub fn inputs(&self) -> (Vec<String>, Vec<MontyObject>) {
        let mut names = Vec::new();
        let mut values = Vec::new();
        for (index, ns) in self.list.iter().enumerate() {
            let index = index as u128;
            let class = MontyObject::class_type(
                ns.class.clone(),
                MontyUuid::from_u128(CLASSES + index),
                true,
                false,
                [],
            );
            let members = ns.members.iter().map(|(name, _)| {
                (
                    MontyObject::string(name.clone()),
                    MontyObject::function(format!("{}.{name}", ns.global), None),
                )
            });
            names.push(ns.global.clone());
            values.push(MontyObject::class_instance(
                class,
                MontyUuid::from_u128(INSTANCES + index),
                members,
            ));
        }
        for ns in &self.list {
            if let Some(class) = &ns.error_class {
                if !names.contains(class) {
                    names.push(class.clone());
                    values.push(MontyObject::type_object(MontyType::Exception(
                        ExcType::ToolCallError,
                    )));
                }
            }
        }
        (names, values)
    }

    /// The call frame header and the tool's name for a call Monty suspended on, or the error
    /// the program gets instead.
    pub fn resolve_call(
        &self,
        call: &monty::FunctionCall,
    ) -> Result<(&[u8], String), MontyException> {
        if let Some(object) = call.object_id {
            // A method the namespace object does not have: names missing from its attributes
            // route here rather than failing in the sandbox.
            let class = self
                .list
                .iter()
                .enumerate()
                .find(|(i, _)| MontyUuid::from_u128(INSTANCES + *i as u128) == object)
                .map_or("object", |(_, ns)| ns.class.as_str());
            return Err(MontyException::new(
                ExcType::AttributeError,
                Some(format!(
                    "'{class}' object has no attribute '{}'",
                    call.function_name
                )),
            ));
        }
        let found = call
            .function_name
            .split_once('.')
            .and_then(|(global, member)| {
                let ns = self.list.iter().find(|ns| ns.global == global)?;
                let (_, header) = ns.members.iter().find(|(name, _)| name == member)?;
                Some((header.as_slice(), member.to_owned()))
            });
        found.ok_or_else(|| {
            MontyException::new(
                ExcType::NameError,
                Some(format!("name '{}' is not defined", call.function_name)),
            )
        })
    }
}

/// `tools` → `Tools`: what the SDK's `tools: Tools` calls its type.
fn class_name(global: &str) -> String {
    let mut chars = global.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// The error a failed call raises: `ToolCallError(message)` with `tool_name`.
pub fn tool_call_error(tool: &str, message: &str) -> MontyException {
    MontyException::new(ExcType::ToolCallError, Some(message.to_owned()))
        .with_data(ExcData::tool_call(tool))
}

/// A call's argument as JSON: the one positional argument, or the keyword arguments as an
/// object (`tools.search(query="x")` is `tools.search({"query": "x"})`), or `{}` for none.
pub fn arguments_json(args: &CallArgs, tool: &str, out: &mut String) -> Result<(), MontyException> {
    let positional = args.args().len();
    let keywords = args.kwargs().len();
    let written = match (positional, keywords) {
        (0, 0) => {
            out.push_str("{}");
            Ok(())
        }
        (1, 0) => {
            let Some(value) = args.arg(0) else {
                return Err(tool_call_error(tool, "the argument cannot be read"));
            };
            json::write(value, out)
        }
        (0, _) => {
            let pairs: Vec<_> = args.kwargs().map(|(k, v)| (k.to_owned(), v.to_owned())).collect();
            json::write(MontyObject::dict(pairs).as_ref(), out)
        }
        _ => {
            return Err(MontyException::new(
                ExcType::TypeError,
                Some(format!(
                    "{tool}() takes one argument, a dict (or keyword arguments), but {positional} positional and {keywords} keyword arguments were given"
                )),
            ))
        }
    };
    written.map_err(|not_json| {
        tool_call_error(
            tool,
            &format!(
                "binding arguments must be lossless JSON: {}",
                not_json.describe()
            ),
        )
    })
}
