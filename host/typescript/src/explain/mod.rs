//! Failures a model can fix in one retry: Boa's generic error texts made to name what V8's
//! name (the callee, the property read or set, an unknown tool and its nearest names), from
//! the program text and the position the guest reported, and a hint for a program that ends
//! by declaring a value it then drops.
//!
//! Everything here runs after a run has settled and only when it failed (or returned
//! `undefined`), so it costs the success path nothing. The program is parsed again with swc
//! (the stripper keeps positions, so the TypeScript the model wrote is what is parsed) and the
//! node at the reported position decides the message; nothing is guessed from the message
//! alone, and a failure that cannot be placed keeps Boa's words.

mod locate;
pub(crate) mod nearest;

use codemode_runtime::code::{FailureKind, RunResult};
use codemode_runtime::ledger;

use locate::{Located, Site};

/// The binding namespaces a program was given, with their members (`tools` → its tool names).
pub type Vocabulary = std::sync::Arc<crate::preflight::Namespaces>;

/// Longest expression quoted in a message; longer ones are cut with `…`.
const MAX_QUOTED_CHARS: usize = 60;
/// Most nearest names offered for an unknown member.
const MAX_SUGGESTIONS: usize = 3;
/// Up to this many members, an unknown-member message lists them all.
const MAX_LISTED: usize = 30;

/// Rewrites `result`'s failure (or adds the missing-`return` hint) when the program text says
/// more than the engine did. Output stays within `max_output_bytes`: a longer message that
/// would not fit is not used.
pub async fn explain(
    program: &str,
    vocabulary: Vocabulary,
    result: &mut RunResult,
    max_output_bytes: u64,
) {
    let wanted = match &result.error {
        Some(error) if error.kind == FailureKind::Exception => Wanted::Failure(Pending {
            message: error.message.clone(),
            line: error.line.unwrap_or(0),
            column: error.column.unwrap_or(0),
        }),
        // A paused run has not returned yet: nothing to hint about.
        None if result.value.is_none() && result.paused.is_none() => Wanted::Hint,
        _ => return,
    };
    if let Wanted::Failure(pending) = &wanted {
        if !worth_parsing(&pending.message) {
            return;
        }
    }
    let Some(outcome) =
        crate::strip::with_parser_stack(program, move |program| work(program, &vocabulary, wanted))
            .await
    else {
        return;
    };
    match outcome {
        Outcome::Failure(Some(better)) => {
            if let Some(error) = &mut result.error {
                let fits = ledger::logs_cost(&result.logs) + ledger::string_cost(&better.message)
                    <= max_output_bytes;
                if fits {
                    error.message = better.message;
                }
                if error.line.is_none() && better.line > 0 {
                    error.line = Some(better.line);
                    error.column = Some(better.column);
                }
            }
        }
        Outcome::Hint(Some(hint)) => result.hint = Some(hint),
        _ => {}
    }
}

/// An engine message this module can say better, and what it tells of the value (`undefined`,
/// `null`, `a number`, …) where it does; anything else is left as it is.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Engine<'a> {
    /// A call of a non-callable value; its kind when it was a primitive.
    NotCallable(Option<&'a str>),
    NotConstructor(Option<&'a str>),
    /// A property read or write met undefined or null (`None`: the message did not say which).
    Nullish(Option<&'a str>),
    NotIterable(&'a str),
    Destructure(&'a str),
    InOperand(&'a str),
}

const NOT_DEFINED_SUFFIX: &str = " is not defined";

impl<'a> Engine<'a> {
    fn parse(message: &'a str) -> Option<Self> {
        let body = message.strip_prefix("TypeError: ")?;
        let between = |prefix: &str, suffix: &str| {
            body.strip_prefix(prefix)
                .and_then(|rest| rest.strip_suffix(suffix))
        };
        Some(match body {
            "not a callable function" => Self::NotCallable(None),
            "not a constructor" => Self::NotConstructor(None),
            "cannot convert 'null' or 'undefined' to object" => Self::Nullish(None),
            _ => {
                if let Some(kind) = body.strip_prefix("not a callable function: the callee is ") {
                    Self::NotCallable(Some(kind))
                } else if let Some(kind) = body.strip_prefix("not a constructor: the callee is ") {
                    Self::NotConstructor(Some(kind))
                } else if let Some(kind) = between("cannot convert '", "' to object") {
                    Self::Nullish(Some(kind))
                } else if let Some(kind) = between("value with type `", "` is not iterable") {
                    Self::NotIterable(kind)
                } else if let Some(kind) = between("Cannot destructure '", "' value") {
                    Self::Destructure(kind)
                } else if let Some(got) =
                    between("right-hand side of 'in' should be an object, got `", "`")
                {
                    Self::InOperand(got)
                } else {
                    return None;
                }
            }
        })
    }
}

fn worth_parsing(message: &str) -> bool {
    Engine::parse(message).is_some()
        || (message.starts_with("ReferenceError: ") && message.ends_with(NOT_DEFINED_SUFFIX))
}

struct Pending {
    message: String,
    line: u32,
    column: u32,
}

enum Wanted {
    Failure(Pending),
    Hint,
}

enum Outcome {
    Failure(Option<Better>),
    Hint(Option<String>),
}

struct Better {
    message: String,
    line: u32,
    column: u32,
}

fn work(program: &str, vocabulary: &Vocabulary, wanted: Wanted) -> Outcome {
    let Some(located) = Located::parse(program) else {
        return match wanted {
            Wanted::Failure(_) => Outcome::Failure(None),
            Wanted::Hint => Outcome::Hint(None),
        };
    };
    match wanted {
        Wanted::Failure(pending) => Outcome::Failure(better(&located, vocabulary, &pending)),
        Wanted::Hint => Outcome::Hint(located.declared_last().map(|(line, name)| {
            format!(
                "hint: the program returned nothing; its last statement (line {line}) declares `{name}`: end with `return {name}` (or just `{name}`) to return it"
            )
        })),
    }
}

fn better(located: &Located, vocabulary: &Vocabulary, pending: &Pending) -> Option<Better> {
    let message = pending.message.as_str();
    if let Some(name) = message
        .strip_prefix("ReferenceError: ")
        .and_then(|m| m.strip_suffix(NOT_DEFINED_SUFFIX))
    {
        // The message names the identifier; only its place may be missing, and why a Web
        // global a program expects is not there.
        let message = match name {
            "fetch" => format!("{message}: this run may reach no host (codemode turns fetch on with --allow-host HOST)"),
            _ => message.to_owned(),
        };
        if pending.line > 0 {
            return (name == "fetch").then_some(Better {
                message,
                line: pending.line,
                column: pending.column,
            });
        }
        let (line, column) = located.free_reference(name)?;
        return Some(Better {
            message,
            line,
            column,
        });
    }
    let engine = Engine::parse(message)?;
    let offset = located.offset_of(pending.line, pending.column)?;
    let text = located
        .sites_at(offset)
        .iter()
        .find_map(|site| say(engine, site, vocabulary))?;
    Some(Better {
        message: text,
        line: pending.line,
        column: pending.column,
    })
}

/// What V8 would say of `engine`'s failure at `site`, when the two fit together.
fn say(engine: Engine<'_>, site: &Site, vocabulary: &Vocabulary) -> Option<String> {
    Some(match (engine, site) {
        (Engine::NotCallable(kind), Site::Call { callee, member }) => {
            let mut text = format!("TypeError: {} is not a function", quoted(callee));
            let unknown = member
                .as_ref()
                .and_then(|(global, name)| unknown_member(vocabulary, global, name));
            match (unknown, kind) {
                (Some(unknown), _) => text.push_str(&unknown),
                (None, Some(kind)) => text.push_str(&format!(" (it is {kind})")),
                (None, None) => {}
            }
            text
        }
        (Engine::NotConstructor(kind), Site::New { callee }) => {
            let mut text = format!("TypeError: {} is not a constructor", quoted(callee));
            if let Some(kind) = kind {
                text.push_str(&format!(" (it is {kind})"));
            }
            text
        }
        (Engine::Nullish(kind), Site::Read { object, property }) => {
            let kind = kind.unwrap_or("undefined or null");
            format!(
                "TypeError: Cannot read properties of {kind} (reading {property}): {} is {kind}",
                quoted(object)
            )
        }
        (Engine::Nullish(kind), Site::Write { object, property }) => {
            let kind = kind.unwrap_or("undefined or null");
            format!(
                "TypeError: Cannot set properties of {kind} (setting {property}): {} is {kind}",
                quoted(object)
            )
        }
        (Engine::NotIterable(kind) | Engine::Nullish(Some(kind)), Site::Iterate { iterable }) => {
            format!(
                "TypeError: {} is not iterable (it is {})",
                quoted(iterable),
                with_article(kind)
            )
        }
        (Engine::Destructure(kind), Site::Destructure { key, source }) => {
            let source = source.as_deref().map_or_else(|| kind.to_owned(), quoted);
            match key {
                Some(key) => format!(
                    "TypeError: Cannot destructure property {key} of '{source}' as it is {kind}."
                ),
                None => format!("TypeError: Cannot destructure '{source}' as it is {kind}."),
            }
        }
        (Engine::InOperand(got), Site::In { key, object }) => {
            // Boa names the operand's `typeof`, and only a non-object throws: "object" is null.
            let what = match got {
                "object" => "null".to_owned(),
                _ => with_article(got),
            };
            format!(
                "TypeError: Cannot use 'in' operator to search for {key} in {}: it is {what}",
                quoted(object)
            )
        }
        _ => return None,
    })
}

/// `undefined` and `null` as they are, any other `typeof` with its article.
fn with_article(kind: &str) -> String {
    match kind {
        "undefined" | "null" => kind.to_owned(),
        _ if kind.starts_with("a ") || kind.starts_with("an ") => kind.to_owned(),
        _ if kind.starts_with(['a', 'e', 'i', 'o', 'u']) => format!("an {kind}"),
        _ => format!("a {kind}"),
    }
}

/// `; unknown tool "serach"; did you mean "search"?` when `global` is a namespace the program
/// was given and `name` is not one of its members.
fn unknown_member(vocabulary: &Vocabulary, global: &str, name: &str) -> Option<String> {
    let names = &vocabulary.iter().find(|ns| ns.global == global)?.members;
    if names.iter().any(|n| n == name) {
        return None;
    }
    Some(format!(": {}", describe_unknown(global, name, names)))
}

/// `unknown tool "serach"; did you mean "search"? Known: …`: a member `name` that namespace
/// `global` (with members `names`) does not have, and the names it probably meant.
pub(crate) fn describe_unknown(global: &str, name: &str, names: &[String]) -> String {
    let what = if global == "tools" {
        "tool".to_owned()
    } else {
        format!("member of {global}")
    };
    let mut text = format!("unknown {what} {}", quote_name(name));
    let near = nearest::nearest(name, names, MAX_SUGGESTIONS);
    if near.is_empty() {
        text.push('.');
    } else {
        let list: Vec<String> = near.iter().map(|n| quote_name(n)).collect();
        text.push_str(&format!("; did you mean {}?", list.join(" or ")));
    }
    if names.len() <= MAX_LISTED {
        text.push_str(&format!(" Known: {}.", names.join(", ")));
    } else {
        text.push_str(&format!(
            " {} are known; the SDK in the prompt lists them.",
            names.len()
        ));
    }
    text
}

fn quote_name(name: &str) -> String {
    serde_json::to_string(name).unwrap_or_else(|_| format!("\"{name}\""))
}

/// An expression as the message shows it: whitespace runs collapsed, cut to
/// [`MAX_QUOTED_CHARS`].
fn quoted(text: &str) -> String {
    let collapsed = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if collapsed.chars().count() <= MAX_QUOTED_CHARS {
        collapsed
    } else {
        let cut: String = collapsed.chars().take(MAX_QUOTED_CHARS - 1).collect();
        format!("{cut}…")
    }
}
