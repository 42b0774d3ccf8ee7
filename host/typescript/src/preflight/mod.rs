//! Preflight: a program's tool calls checked against the tools before anything runs.
//!
//! The program is parsed (swc, the TypeScript as written) and every statically known call of
//! a namespace member (`calls.rs`) is checked: the member must exist, the call must pass an
//! argument, and an argument written as a literal must not break the member's schema where
//! the literal alone decides (`arguments.rs`). Whatever depends on the program's data passes,
//! so no program that could succeed is refused. Every problem is reported at once, each at
//! its line and column, as one `exception` with cause `preflight`; nothing has run.

mod arguments;
mod calls;
mod python;

pub use python::{assigned_last as python_assigned_last, check as check_python};

use std::collections::BTreeMap;

use serde_json::Value;

use codemode_runtime::code::{
    BindingNamespace, BindingRef, FailureCause, FailureKind, Preflight, RunFailure, UrlCheck,
};
use codemode_runtime::tools::Schema;

use crate::source::Source;

/// One namespace as preflight knows it.
#[derive(Debug, Clone, Default)]
pub struct Namespace {
    /// The global it is installed as, e.g. `tools`.
    pub global: String,
    /// Its members' names.
    pub members: Vec<String>,
    /// The argument schema of each member that has one.
    pub schemas: BTreeMap<String, Schema>,
    /// The check of each member that takes a URL (`{url}`).
    pub urls: BTreeMap<String, UrlCheck>,
    /// The member a TypeScript program's global `fetch(url, init?)` calls.
    pub web_fetch: Option<String>,
}

/// What a program is checked against: its namespaces.
pub type Namespaces = Vec<Namespace>;

/// The namespaces of a request, with the schemas and URL checks its preflight names (none
/// without one), and the member the global `fetch` calls.
pub fn namespaces(
    bindings: &[BindingNamespace],
    preflight: Option<&Preflight>,
    web_fetch: Option<&BindingRef>,
) -> Namespaces {
    let of = |ns: &BindingNamespace, at: &BindingRef| {
        at.global == ns.global && ns.functions.contains_key(&at.name)
    };
    bindings
        .iter()
        .map(|ns| Namespace {
            global: ns.global.clone(),
            members: ns.functions.keys().cloned().collect(),
            schemas: preflight
                .into_iter()
                .flat_map(|p| &p.schemas)
                .filter(|(at, _)| of(ns, at))
                .map(|(at, schema)| (at.name.clone(), schema.clone()))
                .collect(),
            urls: preflight
                .into_iter()
                .flat_map(|p| &p.urls)
                .filter(|(at, _)| of(ns, at))
                .map(|(at, check)| (at.name.clone(), check.clone()))
                .collect(),
            web_fetch: web_fetch.filter(|at| of(ns, at)).map(|at| at.name.clone()),
        })
        .collect()
}

/// A literal URL a call passes that the member's check refuses: the argument itself for the
/// global `fetch` (`direct`), else the `url` of an object literal. Where it is written, and why.
pub(crate) fn refused_url(
    expr: &swc_ecma_ast::Expr,
    direct: bool,
    check: &UrlCheck,
) -> Option<(swc_common::Span, String)> {
    use swc_common::Spanned;
    use swc_ecma_ast::{Expr, Prop, PropOrSpread};
    let value = if direct {
        expr
    } else {
        let Expr::Object(object) = calls::unwrap(expr) else {
            return None;
        };
        // The last `url` wins, and a spread after it may replace it.
        let mut found = None;
        for prop in &object.props {
            match prop {
                PropOrSpread::Spread(_) => found = None,
                PropOrSpread::Prop(prop) => match &**prop {
                    Prop::KeyValue(kv) if calls::prop_name(&kv.key).as_deref() == Some("url") => {
                        found = Some(&*kv.value)
                    }
                    Prop::Shorthand(id) if &*id.sym == "url" => found = None,
                    _ => {}
                },
            }
        }
        found?
    };
    let url = calls::static_string(value)?;
    check.check(&url).err().map(|reason| (value.span(), reason))
}

/// A call that cannot succeed, and where the program makes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// 1-based line in the program as written.
    pub line: u32,
    /// 1-based column, in characters.
    pub column: u32,
    /// What is wrong, in the words the call would fail with at run time.
    pub message: String,
}

/// Every problem in `program`'s calls, in source order; empty when it may run (also when it
/// does not parse: the stripper reports that).
pub fn check(program: &str, namespaces: &[Namespace]) -> Vec<Problem> {
    match parse(program) {
        Some(parsed) => check_parsed(&parsed, namespaces),
        None => Vec::new(),
    }
}

/// A program parsed for [`check_parsed`]: the parse and the checks are measured apart.
pub struct Parsed(Source);

/// Parses `program` as the function body it runs as; `None` if it does not parse.
pub fn parse(program: &str) -> Option<Parsed> {
    Source::parse(program).ok().map(Parsed)
}

/// [`check`] of a program already parsed.
pub fn check_parsed(parsed: &Parsed, namespaces: &[Namespace]) -> Vec<Problem> {
    check_source(&parsed.0, namespaces)
}

/// The problems of the statically known calls in `source` to `namespaces`' tools.
pub fn check_source(source: &Source, namespaces: &[Namespace]) -> Vec<Problem> {
    let globals: Vec<&str> = namespaces.iter().map(|ns| ns.global.as_str()).collect();
    let web = namespaces
        .iter()
        .enumerate()
        .find_map(|(i, ns)| Some((i, ns.web_fetch.as_deref()?)));
    let mut found: Vec<(usize, swc_common::Span, String)> = Vec::new();
    let untrusted = calls::find(&source.body, &globals, web, |call| {
        let Some(ns) = namespaces.get(call.namespace) else {
            return;
        };
        if call.web {
            let check = ns.urls.get(&*call.name);
            if let (Some(first), Some(check)) = (call.args.first(), check) {
                if first.spread.is_none() {
                    if let Some((span, reason)) = refused_url(&first.expr, true, check) {
                        found.push((call.namespace, span, reason));
                    }
                }
            }
            return;
        }
        let known = ns.members.iter().any(|m| *m == call.name);
        if !known {
            if !call.optional {
                let message = crate::explain::describe_unknown(&ns.global, &call.name, &ns.members);
                found.push((call.namespace, call.name_span, message));
            }
            return;
        }
        let Some(first) = call.args.first() else {
            let message = format!(
                "{}: called without an argument; it takes one object{}",
                call.name,
                needs(ns.schemas.get(&*call.name).map(Schema::json))
            );
            found.push((call.namespace, call.name_span, message));
            return;
        };
        if first.spread.is_some() {
            return;
        }
        if let Some(check) = ns.urls.get(&*call.name) {
            if let Some((span, reason)) = refused_url(&first.expr, false, check) {
                found.push((call.namespace, span, reason));
            }
        }
        let Some(schema) = ns.schemas.get(&*call.name) else {
            return;
        };
        let mut findings = Vec::new();
        arguments::check(&first.expr, schema.json(), &mut findings);
        for finding in findings {
            let message = format!("{}: invalid arguments: {}", call.name, finding.message);
            found.push((call.namespace, finding.span, message));
        }
    });
    let mut problems: Vec<Problem> = found
        .into_iter()
        .filter(|(ns, ..)| !untrusted.get(*ns).copied().unwrap_or(true))
        .map(|(_, span, message)| {
            let (line, column) = source.position(span);
            Problem {
                line,
                column,
                message,
            }
        })
        .collect();
    problems.sort_by_key(|p| (p.line, p.column));
    problems
}

/// ` with "path"` for a schema with required keys.
fn needs(schema: Option<&Value>) -> String {
    let required: Vec<String> = schema
        .and_then(|s| s.get("required"))
        .and_then(Value::as_array)
        .map(|r| {
            r.iter()
                .filter_map(Value::as_str)
                .map(|k| format!("\"{k}\""))
                .collect()
        })
        .unwrap_or_default();
    if required.is_empty() {
        ": pass {} when there is nothing to say".to_owned()
    } else {
        format!(" with {}", required.join(", "))
    }
}

/// Most problems a failure lists; the rest are counted.
const MAX_LISTED: usize = 50;

/// The one failure a refused program ends with: every problem on a line of its own, the run
/// placed at the first.
pub fn failure(problems: &[Problem]) -> RunFailure {
    let count = match problems.len() {
        1 => "1 problem".to_owned(),
        n => format!("{n} problems"),
    };
    let mut message =
        format!("preflight: these tool calls cannot succeed, so nothing ran ({count}):");
    for problem in problems.iter().take(MAX_LISTED) {
        message.push_str(&format!(
            "\n  {}:{}  {}",
            problem.line, problem.column, problem.message
        ));
    }
    if problems.len() > MAX_LISTED {
        message.push_str(&format!("\n  … and {} more", problems.len() - MAX_LISTED));
    }
    let failure =
        RunFailure::new(FailureKind::Exception, message).with_cause(FailureCause::Preflight);
    match problems.first() {
        Some(first) => failure.at(first.line, first.column),
        None => failure,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn namespace() -> Vec<Namespace> {
        let schema = |value: Value| Schema::foreign(value).expect("a schema");
        let tools = [
            (
                "read",
                json!({"type": "object", "properties": {"path": {"type": "string"}, "limit": {"type": ["integer", "null"]}}, "required": ["path"]}),
            ),
            (
                "put",
                json!({"type": "object", "additionalProperties": false, "properties": {
                    "mode": {"enum": ["a", "b"]},
                    "item": {"type": "object", "properties": {"n": {"type": "number"}}, "required": ["n"]},
                    "tags": {"type": "array", "items": {"type": "string"}},
                    "node": {"$ref": "#/$defs/node"},
                }, "$defs": {"node": {"type": "object"}}}),
            ),
        ];
        vec![Namespace {
            global: "tools".into(),
            members: tools.iter().map(|(n, _)| n.to_string()).collect(),
            schemas: tools
                .into_iter()
                .map(|(n, s)| (n.to_owned(), schema(s)))
                .collect(),
            ..Namespace::default()
        }]
    }

    fn problems(program: &str) -> Vec<String> {
        check(program, &namespace())
            .into_iter()
            .map(|p| format!("{}:{} {}", p.line, p.column, p.message))
            .collect()
    }

    #[test]
    fn each_kind_of_problem_in_the_validators_words() {
        assert_eq!(
            problems("await tools.put({ mode: 'c', item: { n: '1' }, tags: ['x', 2], extra: 1 })"),
            [
                "1:25 put: invalid arguments: \"mode\" must be one of [\"a\",\"b\"]",
                "1:41 put: invalid arguments: \"item.n\" must be a number",
                "1:60 put: invalid arguments: \"tags[1]\" must be a string",
                "1:64 put: invalid arguments: \"extra\" is not a declared property (additionalProperties: false)",
            ]
        );
        assert_eq!(
            problems("tools.read({ limit: 1.5 });\ntools.read();\ntools.read('a');\ntools.raed({ path: 'a' })"),
            [
                "1:12 read: invalid arguments: missing required property \"path\"",
                "1:21 read: invalid arguments: \"limit\" must be an integer or null",
                "2:7 read: called without an argument; it takes one object with \"path\"",
                "3:12 read: invalid arguments: \"arguments\" must be an object",
                "4:7 unknown tool \"raed\"; did you mean \"read\"? Known: read, put.",
            ]
        );
    }

    #[test]
    fn every_way_of_naming_a_tool_is_checked() {
        for program in [
            "const t = tools; await t.read({ path: 1 })",
            "const { read } = tools; await read({ path: 1 })",
            "const { read: r } = tools; await r({ path: 1 })",
            "await tools['read']({ path: 1 })",
            "await tools[`read`]({ path: 1 })",
            "await (tools.read as any)({ path: 1 })",
            "for (const p of [1]) { await Promise.all([1].map(async () => tools.read({ path: 1 }))) }",
            "function f() { return tools.read({ path: 1 }) }",
        ] {
            assert_eq!(problems(program).len(), 1, "{program}");
        }
    }

    #[test]
    fn what_is_not_known_statically_passes() {
        for program in [
            "const a = { path: 'x' }; await tools.read(a)",
            "await tools.read({ ...base })",
            "await tools.read({ [key]: 'x' })",
            "await tools.read({ path: cond ? 'a' : 'b' })",
            "await tools.put({ node: 5 })",
            "await tools.read(...args)",
            "await tools.nothing?.({})",
            "let t = tools; await t.nothing({})",
            "function f(tools) { return tools.nothing() }",
            "{ const tools = other; tools.nothing() }",
            "if (x) { var tools = other } tools.nothing()",
            "try {} catch (tools) { tools.nothing() }",
            "with (o) { tools.nothing() }",
            "eval(s); tools.nothing()",
            "tools = other; tools.nothing()",
            "const name = 'nothing'; await tools[name]({})",
            "await tools.read({ path: 'a', limit: null })",
        ] {
            assert_eq!(problems(program), Vec::<String>::new(), "{program}");
        }
    }

    #[test]
    fn a_failure_lists_every_problem_up_to_a_bound() {
        let program = "tools.nothing({});\n".repeat(MAX_LISTED + 3);
        let found = check(&program, &namespace());
        assert_eq!(found.len(), MAX_LISTED + 3);
        let failure = failure(&found);
        assert_eq!(failure.cause, Some(FailureCause::Preflight));
        assert_eq!((failure.line, failure.column), (Some(1), Some(7)));
        assert!(
            failure.message.ends_with("\n  … and 3 more"),
            "{}",
            failure.message
        );
        assert!(failure
            .message
            .starts_with("preflight: these tool calls cannot succeed, so nothing ran (53 problems):\n  1:7  unknown tool"));
    }
}
