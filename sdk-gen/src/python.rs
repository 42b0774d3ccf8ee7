//! The Python `tools:sdk` text: the `run_code` instructions, then one fenced block with the
//! `typing` import, `ToolCallError`, a `TypedDict` class per object shape (dependencies first),
//! the `Tools` protocol and `tools: Tools`.
//!
//! Objects become named classes (`<Tool>Args`, `<Parent><Field>`, `<Base>1` for union branches);
//! shared or recursive definitions are printed once, before the tools, as a class or a
//! `TypeAlias`, and a reference to one that is still being printed (a cycle) is quoted.
//! Recursion follows shape nesting, which lowering bounds, so it cannot exhaust the stack.

use crate::instructions::PYTHON_INSTRUCTIONS;
use crate::sdk::LoweredTool;
use crate::shape::{tool_pascal, AliasId, Arena, Object, Rest, Shape, ShapeId};
use crate::text::{
    is_python_identifier, is_python_mangled, json_quote, pascal_case, python_comment_escape,
    python_docstring_escape,
};
use serde_json::Value;
use std::collections::BTreeSet;

/// Lists nested deeper than this become `Any`: CPython refuses more than 200 open brackets.
const MAX_LIST_NESTING: usize = 180;
/// Longest class-name stem before a collision suffix.
const MAX_CLASS_NAME_CHARS: usize = 120;

/// Names a generated class may not take.
const RESERVED: [&str; 12] = [
    "Any",
    "Literal",
    "NotRequired",
    "Protocol",
    "TypeAlias",
    "TypedDict",
    "ToolCallError",
    "Tools",
    "tools",
    "Exception",
    "None",
    "object",
];

/// Which `typing` names the text uses, in the order they are imported.
#[derive(Default)]
struct Imports {
    any: bool,
    literal: bool,
    not_required: bool,
    type_alias: bool,
    typed_dict: bool,
}

struct Printer<'a> {
    arena: &'a Arena,
    taken: BTreeSet<String>,
    /// Classes that are `TypedDict`s, so they can be bases of an intersection class.
    typed_dicts: BTreeSet<String>,
    /// Class and alias definitions, in the order they are printed.
    definitions: Vec<String>,
    emitted_aliases: Vec<bool>,
    imports: Imports,
}

/// The whole section for `tools`, which are already sorted and unique.
pub fn render(arena: &Arena, tools: &[LoweredTool<'_>]) -> String {
    let mut printer = Printer {
        arena,
        taken: RESERVED.iter().map(|n| (*n).to_owned()).collect(),
        typed_dicts: BTreeSet::new(),
        definitions: Vec::new(),
        emitted_aliases: vec![false; arena.aliases.len()],
        imports: Imports::default(),
    };
    printer
        .taken
        .extend(arena.aliases.iter().map(|a| a.name.clone()));
    for alias in alias_order(arena) {
        printer.define_alias(alias);
    }

    let mut members = Vec::with_capacity(tools.len());
    let mut comments = Vec::new();
    for tool in tools {
        let stem = tool_pascal(tool.name);
        let args = printer.expr(tool.args, &format!("{stem}Args"), 0);
        let output = match tool.output {
            Some(output) => printer.expr(output, &format!("{stem}Output"), 0),
            None => printer.any(),
        };
        if is_python_identifier(tool.name) && !tool.name.starts_with('_') {
            let mut member = format!(
                "    async def {}(self, args: {args}) -> {output}:",
                tool.name
            );
            match &tool.description {
                Some(doc) => {
                    member.push_str("\n        \"\"\"");
                    member.push_str(&python_docstring_escape(doc));
                    member.push_str("\"\"\"");
                }
                None => member.push_str(" ..."),
            }
            members.push(member);
        } else {
            let mut comment = format!(
                "    # tools[{}](args: {args}) -> {output}",
                json_quote(tool.name)
            );
            if let Some(doc) = &tool.description {
                comment.push_str("\n    #   ");
                comment.push_str(&python_comment_escape(doc));
            }
            comments.push(comment);
        }
    }

    let mut out = String::new();
    out.push_str(PYTHON_INSTRUCTIONS);
    out.push_str("\n\n```python\nfrom typing import ");
    out.push_str(&printer.imports.line());
    out.push_str("\n\nclass ToolCallError(Exception):\n    tool_name: str\n\n");
    for definition in &printer.definitions {
        out.push_str(definition);
        out.push_str("\n\n");
    }
    out.push_str("class Tools(Protocol):\n");
    if members.is_empty() {
        out.push_str("    pass\n");
    }
    for line in members.iter().chain(comments.iter()) {
        out.push_str(line);
        out.push('\n');
    }
    out.push_str("\ntools: Tools\n```");
    out
}

impl Imports {
    fn line(&self) -> String {
        let mut names = Vec::new();
        if self.any {
            names.push("Any");
        }
        if self.literal {
            names.push("Literal");
        }
        if self.not_required {
            names.push("NotRequired");
        }
        names.push("Protocol");
        if self.type_alias {
            names.push("TypeAlias");
        }
        if self.typed_dict {
            names.push("TypedDict");
        }
        names.join(", ")
    }
}

impl Printer<'_> {
    fn any(&mut self) -> String {
        self.imports.any = true;
        "Any".to_owned()
    }

    /// A fresh class name from `base` (capped, then suffixed `2`, `3`, … on collision).
    fn class_name(&mut self, base: &str) -> String {
        let base: String = base.chars().take(MAX_CLASS_NAME_CHARS).collect();
        crate::text::unique_name(&mut self.taken, &base)
    }

    /// Prints a shared or recursive definition under its own name.
    fn define_alias(&mut self, alias: AliasId) {
        let Some(entry) = self.arena.aliases.get(alias) else {
            return;
        };
        let name = entry.name.clone();
        let text = match self.arena.get(entry.body) {
            Shape::Object(object) => self.object(object, &name, Some(&name)),
            _ => self.expr(entry.body, &name, 0),
        };
        if text != name {
            self.imports.type_alias = true;
            self.definitions.push(format!("{name}: TypeAlias = {text}"));
        }
        if let Some(done) = self.emitted_aliases.get_mut(alias) {
            *done = true;
        }
    }

    /// The type expression of `id`; classes it needs are printed first. `base` names them.
    fn expr(&mut self, id: ShapeId, base: &str, lists: usize) -> String {
        match self.arena.get(id) {
            Shape::Unknown | Shape::Json | Shape::Never => self.any(),
            Shape::String => "str".to_owned(),
            Shape::Number => "float".to_owned(),
            Shape::Integer => "int".to_owned(),
            Shape::Boolean => "bool".to_owned(),
            Shape::Null => "None".to_owned(),
            Shape::Literals(values) => self.literals(values),
            Shape::Array(None) => format!("list[{}]", self.any()),
            Shape::Array(Some(item)) => {
                if lists >= MAX_LIST_NESTING {
                    return self.any();
                }
                format!(
                    "list[{}]",
                    self.expr(*item, &format!("{base}Item"), lists + 1)
                )
            }
            Shape::Object(object) => self.object(object, base, None),
            Shape::Union(members) => {
                let mut parts: Vec<String> = Vec::with_capacity(members.len());
                for (i, member) in members.iter().enumerate() {
                    let part = self.expr(*member, &format!("{base}{}", i + 1), lists);
                    if !parts.contains(&part) {
                        parts.push(part);
                    }
                }
                if parts.iter().any(|p| p == "Any") {
                    return self.any();
                }
                parts.join(" | ")
            }
            Shape::Intersection(members) => self.intersection(members, base, lists),
            Shape::Alias(alias) => match self.arena.aliases.get(*alias) {
                Some(entry) if self.emitted_aliases.get(*alias) == Some(&true) => {
                    entry.name.clone()
                }
                // Still being printed: a recursive reference, so a forward reference.
                Some(entry) => json_quote(&entry.name),
                None => self.any(),
            },
        }
    }

    /// `Literal[...]` of the non-float values; floats cannot be literal types, so they widen to
    /// `float`.
    fn literals(&mut self, values: &[Value]) -> String {
        let mut literal = Vec::new();
        let mut float = false;
        for value in values {
            match value {
                Value::String(text) => literal.push(json_quote(text)),
                Value::Bool(true) => literal.push("True".to_owned()),
                Value::Bool(false) => literal.push("False".to_owned()),
                Value::Null => literal.push("None".to_owned()),
                Value::Number(n) if n.is_i64() || n.is_u64() => literal.push(n.to_string()),
                Value::Number(_) => float = true,
                Value::Array(_) | Value::Object(_) => return self.any(),
            }
        }
        let mut parts = Vec::new();
        if !literal.is_empty() {
            self.imports.literal = true;
            parts.push(format!("Literal[{}]", literal.join(", ")));
        }
        if float {
            parts.push("float".to_owned());
        }
        parts.join(" | ")
    }

    /// A `TypedDict` class for `object` (named `exact`, or fresh from `base`), or `dict[...]`
    /// when its keys cannot all be class fields.
    fn object(&mut self, object: &Object, base: &str, exact: Option<&str>) -> String {
        if object.properties.is_empty() {
            match &object.rest {
                Rest::Open | Rest::Unstated => return format!("dict[str, {}]", self.any()),
                Rest::Typed(value) => {
                    let value = self.expr(*value, &format!("{base}Value"), 0);
                    return format!("dict[str, {value}]");
                }
                Rest::Closed => {}
            }
        }
        let fields_ok = object
            .properties
            .iter()
            .all(|p| is_python_identifier(&p.key) && !is_python_mangled(&p.key));
        if !fields_ok {
            return format!("dict[str, {}]", self.any());
        }

        let name = match exact {
            Some(name) => name.to_owned(),
            None => self.class_name(base),
        };
        let mut body = String::new();
        if matches!(object.rest, Rest::Open | Rest::Typed(_)) {
            body.push_str("\n    # Additional keys beyond those declared are allowed.");
        }
        for property in &object.properties {
            let field_base = match pascal_case(&property.key) {
                field if field.is_empty() => format!("{name}Field"),
                field => format!("{name}{field}"),
            };
            let field_type = self.expr(property.shape, &field_base, 0);
            if let Some(doc) = property.doc.as_deref().filter(|d| !d.is_empty()) {
                body.push_str("\n    # ");
                body.push_str(&python_comment_escape(doc));
            }
            body.push_str("\n    ");
            body.push_str(&property.key);
            body.push_str(": ");
            if property.required {
                body.push_str(&field_type);
            } else {
                self.imports.not_required = true;
                body.push_str("NotRequired[");
                body.push_str(&field_type);
                body.push(']');
            }
        }
        if object.properties.is_empty() {
            body.push_str("\n    pass");
        }
        self.imports.typed_dict = true;
        self.definitions
            .push(format!("class {name}(TypedDict):{body}"));
        self.typed_dicts.insert(name.clone());
        name
    }

    /// `allOf` of objects: a class inheriting every member's class. Anything else is `Any`.
    fn intersection(&mut self, members: &[ShapeId], base: &str, lists: usize) -> String {
        let mut bases: Vec<String> = Vec::with_capacity(members.len());
        for (i, member) in members.iter().enumerate() {
            let part = self.expr(*member, &format!("{base}{}", i + 1), lists);
            if !self.typed_dicts.contains(&part) {
                return self.any();
            }
            if !bases.contains(&part) {
                bases.push(part);
            }
        }
        let name = self.class_name(base);
        self.definitions
            .push(format!("class {name}({}):\n    pass", bases.join(", ")));
        self.typed_dicts.insert(name.clone());
        name
    }
}

/// Aliases in dependency order (an alias after the aliases its body names), found with an
/// explicit stack; members of a cycle come in first-visit order and refer to each other quoted.
fn alias_order(arena: &Arena) -> Vec<AliasId> {
    let count = arena.aliases.len();
    let mut order = Vec::with_capacity(count);
    // 0 new, 1 on the stack, 2 placed. Indexing is in bounds: `start` ranges over the aliases,
    // `next` is checked with `get` first, and the stack only holds indices already checked.
    let mut state = vec![0u8; count];
    for start in 0..count {
        if state[start] != 0 {
            continue;
        }
        // Each frame: an alias and the aliases its body names that are still to visit.
        let mut stack: Vec<(AliasId, Vec<AliasId>)> =
            vec![(start, alias_dependencies(arena, start))];
        state[start] = 1;
        while let Some((alias, pending)) = stack.last_mut() {
            let alias = *alias;
            match pending.pop() {
                Some(next) if state.get(next) == Some(&0) => {
                    state[next] = 1;
                    let deps = alias_dependencies(arena, next);
                    stack.push((next, deps));
                }
                Some(_) => {}
                None => {
                    state[alias] = 2;
                    order.push(alias);
                    stack.pop();
                }
            }
        }
    }
    order
}

/// The aliases named in `alias`'s body (not through other aliases), reversed so that popping
/// visits them in the order they appear.
fn alias_dependencies(arena: &Arena, alias: AliasId) -> Vec<AliasId> {
    let mut found = Vec::new();
    let Some(entry) = arena.aliases.get(alias) else {
        return found;
    };
    let mut stack = vec![entry.body];
    while let Some(id) = stack.pop() {
        match arena.get(id) {
            Shape::Alias(target) => found.push(*target),
            Shape::Array(Some(item)) => stack.push(*item),
            Shape::Object(object) => {
                if let Rest::Typed(value) = object.rest {
                    stack.push(value);
                }
                stack.extend(object.properties.iter().rev().map(|p| p.shape));
            }
            Shape::Union(members) | Shape::Intersection(members) => {
                stack.extend(members.iter().rev());
            }
            _ => {}
        }
    }
    found.reverse();
    found
}
