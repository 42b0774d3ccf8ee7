//! The code-runtime contract: what an agent host hands a sandbox and what it gets back.
//!
//! A [`CodeRuntime`] runs one program per [`RunRequest`]. Every program outcome *resolves* as a
//! [`RunResult`] with the failure as a field; `run` returns `Err` only for misuse of the seam
//! (after disposal, or with invalid binding declarations, see [`validate_bindings`]).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::future::Future;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::signal::AbortSignal;
pub use codemode_sdk_gen::Language;

pub use futures::future::BoxFuture;

/// A host function the program can call as `global.name(args)`. It takes one lossless JSON
/// value and resolves with one, or rejects with a message the program sees on its error. The
/// signal fires when the run settles while the call is still running: the runtime then waits
/// for the call to finish (it never abandons a started call), so a binding should stop early.
pub type BindingFn =
    Arc<dyn Fn(Value, AbortSignal) -> BoxFuture<'static, Result<Value, String>> + Send + Sync>;

/// Wraps an async closure as a [`BindingFn`].
pub fn binding<F, Fut>(f: F) -> BindingFn
where
    F: Fn(Value, AbortSignal) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Value, String>> + Send + 'static,
{
    Arc::new(move |args, signal| Box::pin(f(args, signal)))
}

/// Why a call through [`InputCalls`] failed: its message, and the questions of a call that
/// needs a person's input.
#[derive(Debug, Clone, PartialEq)]
pub struct CallFailure {
    /// What the program sees when the run does not pause for the questions.
    pub message: String,
    /// The questions, when the call needs answers before it can finish.
    pub input: Option<Arc<crate::tools::NeedsInput>>,
}

impl From<String> for CallFailure {
    fn from(message: String) -> Self {
        Self {
            message,
            input: None,
        }
    }
}

/// Calls of bindings that can need a person's input ([`crate::tools::ToolError::needs_input`]):
/// a runtime that keeps paused runs makes such calls through this rather than their
/// [`BindingFn`], pauses the run on one that fails with questions, and at its resume makes the
/// call again with the answers.
pub trait InputCalls: Send + Sync + fmt::Debug {
    /// Whether calls of `global.name` are made through this.
    fn covers(&self, global: &str, name: &str) -> bool;

    /// Calls `binding`, a `(global, name)` this covers, as its [`BindingFn`] would, with `answers` to an
    /// earlier call's questions.
    fn call(
        &self,
        binding: (&str, &str),
        arguments: Value,
        signal: AbortSignal,
        answers: Option<Arc<crate::tools::InputAnswers>>,
    ) -> BoxFuture<'static, Result<Value, CallFailure>>;
}

/// The class a namespace's rejections are instances of, e.g. `ToolCallError` with `toolName`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorClass {
    /// The class's global name, e.g. `ToolCallError`.
    pub name: String,
    /// The error property that carries the called member's name, e.g. `toolName`.
    pub member_name_property: String,
}

/// One program-visible object, `global`, whose members are host functions.
#[derive(Clone)]
pub struct BindingNamespace {
    /// The global the namespace is installed as, e.g. `tools`.
    pub global: String,
    /// Member names are arbitrary strings (`__proto__` and `constructor` included).
    pub functions: BTreeMap<String, BindingFn>,
    /// The class rejections are instances of; without one they are plain `Error`s.
    pub error_class: Option<ErrorClass>,
}

impl fmt::Debug for BindingNamespace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BindingNamespace")
            .field("global", &self.global)
            .field("functions", &self.functions.keys().collect::<Vec<_>>())
            .field("error_class", &self.error_class)
            .finish()
    }
}

/// One program to run. Budgets are the runtime's configuration; a request may only tighten
/// them for its own run.
#[derive(Debug, Clone, Default)]
pub struct RunRequest {
    /// The body of an async TypeScript function (top-level `await` and `return` work). Unused
    /// when the request resumes a paused run.
    pub program: String,
    /// The namespaces the program can call, checked by [`validate_bindings`].
    pub bindings: Vec<BindingNamespace>,
    /// Fires to abort the run; the result is then a failure of kind `abort` with its reason.
    pub signal: Option<AbortSignal>,
    /// Binding functions that *pause* the run instead of running: a call of one is not made
    /// but left pending, and once everything else the program waits on is one of them, the run
    /// stops with [`RunResult::paused`] for its caller to answer later. A runtime that cannot
    /// keep paused runs refuses a request naming any with [`RunRejection::Pause`].
    pub pause_on: BTreeSet<BindingRef>,
    /// Binding functions whose calls pause the run for a human's *approval*: like `pause_on`,
    /// but the answer is a decision, not the result. A resume's `true` makes the call for real
    /// (the program gets its result), `false` or a rejection denies it.
    pub approve_on: BTreeSet<BindingRef>,
    /// Continue the paused run this names instead of starting `program`.
    pub resume: Option<Resume>,
    /// Budgets for this run: each applies up to the runtime's own (a request cannot loosen
    /// them). `None`: the runtime's. A resumed run keeps the budgets it started with.
    pub budgets: Option<crate::budgets::Budgets>,
    /// Check the program's tool calls against these schemas before it runs (see
    /// [`Preflight`]); `None` runs it unchecked.
    pub preflight: Option<Arc<Preflight>>,
    /// Where the run counts the host memory it holds outside its sandbox (arguments in flight,
    /// results waiting for the program); the runtime sets its limit to the run's memory budget.
    /// A caller that holds the run's results itself before its bindings hand them over (the
    /// `run_code` scheduler) charges them here too, so that they count against the same
    /// budget. One account per run; `None`: the runtime keeps its own.
    pub held: Option<Arc<crate::held::HeldMemory>>,
    /// Caps on the calls the program may make; past one the run stops as an `exception` with
    /// [`FailureCause::Calls`], and the calls it made are its record. Empty: only the runtime's
    /// own ceiling.
    pub call_caps: CallCaps,
    /// The binding function a TypeScript program's global `fetch(url, init?)` goes through
    /// (the Web shape, answered with a `Response`); `None`: the program has no `fetch`.
    pub web_fetch: Option<BindingRef>,
    /// The bindings whose calls can need a person's input, made through this (see
    /// [`InputCalls`]); `None`: every call goes through its [`BindingFn`].
    pub input_calls: Option<Arc<dyn InputCalls>>,
}

/// Caps on the calls one run may make ([`RunRequest::call_caps`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CallCaps {
    /// Most calls in all; `None`: the runtime's ceiling.
    pub total: Option<u64>,
    /// Most calls of each binding function, by its name (in any namespace).
    pub per_function: BTreeMap<String, u64>,
}

/// What a runtime checks a program against before running it: every statically known call of
/// a binding function (`tools.name({...})`) must name a member its namespace has, and an
/// object-literal argument must not break the member's argument schema where the literal
/// alone decides (a missing required key, an undeclared key, a literal of the wrong type or
/// outside an `enum`). Anything not known statically passes, so a program that could succeed
/// is never refused; one that cannot fails with [`FailureCause::Preflight`] before any call.
#[derive(Debug, Clone, Default)]
pub struct Preflight {
    /// Each binding function's argument schema; a function without one is checked for its
    /// name only.
    pub schemas: BTreeMap<BindingRef, crate::tools::Schema>,
    /// Binding functions that take a URL (`{url}`, or the global `fetch`'s first argument):
    /// a literal URL the check refuses fails preflight with its reason.
    pub urls: BTreeMap<BindingRef, UrlCheck>,
}

/// Whether a URL may be fetched, as far as its text decides (scheme, allowed hosts, literal
/// addresses); `Err` says why not, in words for the program's author.
#[derive(Clone)]
pub struct UrlCheck(pub Arc<UrlCheckFn>);

/// The function a [`UrlCheck`] calls.
pub type UrlCheckFn = dyn Fn(&str) -> Result<(), String> + Send + Sync;

impl UrlCheck {
    /// Checks `url`.
    pub fn check(&self, url: &str) -> Result<(), String> {
        (self.0)(url)
    }
}

impl fmt::Debug for UrlCheck {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("UrlCheck")
    }
}

/// One binding function, `global.name`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct BindingRef {
    /// The namespace's global, e.g. `tools`.
    pub global: String,
    /// The member, e.g. `approve`.
    pub name: String,
}

impl BindingRef {
    /// `global.name`.
    pub fn new(global: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            global: global.into(),
            name: name.into(),
        }
    }
}

/// The answers a paused run is resumed with.
#[derive(Debug, Clone, Default)]
pub struct Resume {
    /// The run id [`PausedRun::run_id`] gave.
    pub run_id: String,
    /// Answers to pending calls by [`PendingCall::call_id`]: a value the call resolves with,
    /// or a message it rejects with. Calls left unanswered stay pending; the run pauses again
    /// when it has nothing else to wait on.
    pub replies: Vec<(String, Reply)>,
}

/// An answer to a pending call: the value it resolves with, or the message it rejects with.
pub type Reply = Result<Value, String>;

/// A run that stopped at pausing calls and was written down to be resumed later.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PausedRun {
    /// Names the record; pass it in [`Resume::run_id`]. A record is resumed at most once.
    pub run_id: String,
    /// The calls the run waits on, in the order the program made them.
    pub pending: Vec<PendingCall>,
}

/// One call a paused run waits on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PendingCall {
    /// Answers name the call by this id.
    pub call_id: String,
    /// The namespace's global.
    pub global: String,
    /// The member called (for `tools`, the tool's name).
    pub name: String,
    /// What the program passed.
    pub arguments: Value,
    /// The call waits for an approval (`RunRequest::approve_on`): answer `true` to make it,
    /// `false` or a rejection to deny it, or `{"approved": bool, "scope": "run"}` to decide
    /// every call of the tool for the rest of the run (`"session"` too, which the host may
    /// also keep for the session's later runs: `Registry::remember_approval`; `"call"` is
    /// the plain answer).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub approval: bool,
    /// The call was made and needs a person's answers before it can finish: each question by
    /// its key, an MCP form elicitation (`{mode, message, requestedSchema}`). Answer with an
    /// object of elicitation results by key (`{"KEY": {"action": "accept", "content":
    /// {...}}}`), and the call is made again with them; a rejection fails it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub questions: Option<BTreeMap<String, Value>>,
}

/// What a run produced. `value` is absent when the run failed or returned `undefined`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunResult {
    /// The program's return value.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<Value>,
    /// The program's console output, one entry per `console` call.
    pub logs: Vec<String>,
    /// Why the run failed; absent on success.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<RunFailure>,
    /// Every binding call the program started, in start order, with how it ended; a caller can
    /// tell from it whether a retry would repeat side effects.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub calls: Vec<CallRecord>,
    /// A one-line hint for the model about a likely mistake the run itself did not fail on (a
    /// program that ends with a bare expression and returns nothing). Not output: outside the
    /// ledger, and the run is the same with or without it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
    /// Set when the run paused instead of finishing (`value` and `error` are then absent):
    /// `logs` holds what it printed so far, and the run continues with a [`Resume`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused: Option<PausedRun>,
    /// The compute the run burned, in the runtime's fuel units, when it meters compute in fuel.
    /// The same program given the same tool replies burns the same fuel on any machine and
    /// under any load; a resumed run counts what it burned since the resume.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compute_fuel: Option<u64>,
}

/// How one binding call ended, seen from the run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallRecord {
    /// The namespace's global.
    pub global: String,
    /// The member that was called.
    pub name: String,
    /// How the call ended.
    pub outcome: CallOutcome,
}

/// How a binding call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CallOutcome {
    /// The binding resolved.
    Resolved,
    /// The binding rejected, or the call was refused before it ran.
    Rejected,
    /// The run ended while the binding was still running; it was aborted and awaited.
    Abandoned,
}

impl CallOutcome {
    /// The outcome as `--json` spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            CallOutcome::Resolved => "resolved",
            CallOutcome::Rejected => "rejected",
            CallOutcome::Abandoned => "abandoned",
        }
    }
}

/// Why a run failed. The kinds keep the reference's strings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunFailure {
    /// The broad class of failure.
    pub kind: FailureKind,
    /// What went wrong, as the program or the caller should see it.
    pub message: String,
    /// The limit or fault behind a `timeout` or `worker-exit`, or `preflight` for an
    /// `exception` found before the program ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cause: Option<FailureCause>,
    /// 1-based line in the TypeScript the model wrote (exceptions only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
    /// 1-based column in the TypeScript the model wrote (exceptions only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub column: Option<u32>,
}

impl RunFailure {
    /// A failure with no cause and no position.
    pub fn new(kind: FailureKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            message: message.into(),
            cause: None,
            line: None,
            column: None,
        }
    }

    /// Sets the limit or fault behind the failure.
    pub fn with_cause(mut self, cause: FailureCause) -> Self {
        self.cause = Some(cause);
        self
    }

    /// Sets the 1-based position in the program; a zero line leaves it unset, a zero column
    /// sets only the line.
    pub fn at(mut self, line: u32, column: u32) -> Self {
        if line > 0 {
            self.line = Some(line);
            self.column = (column > 0).then_some(column);
        }
        self
    }
}

/// The broad class of a run failure, serialized as the reference's kebab-case strings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FailureKind {
    /// The program threw, or failed to parse or type-strip.
    Exception,
    /// A budget expired; the message says which.
    Timeout,
    /// The request's signal fired (or the runtime was disposed).
    Abort,
    /// The sandbox died without settling (memory, stack, a trap).
    WorkerExit,
    /// The completion value was not lossless JSON.
    InvalidOutput,
    /// Logs plus value or diagnostic exceeded the output cap.
    OutputLimit,
}

impl FailureKind {
    /// The kind's reference string, e.g. `worker-exit`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Exception => "exception",
            Self::Timeout => "timeout",
            Self::Abort => "abort",
            Self::WorkerExit => "worker-exit",
            Self::InvalidOutput => "invalid-output",
            Self::OutputLimit => "output-limit",
        }
    }
}

impl fmt::Display for FailureKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which limit or fault ended a run, where the kind alone does not say.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FailureCause {
    /// The compute (fuel) budget ran out.
    Compute,
    /// The wall-clock ceiling was reached.
    Wall,
    /// The memory limit was exceeded.
    Memory,
    /// The sandbox's stack was exhausted.
    Stack,
    /// The sandbox trapped or exited for any other reason.
    Trap,
    /// An `exception` found before the program ran: its tool calls cannot succeed (see
    /// [`Preflight`]); nothing ran.
    Preflight,
    /// An `exception` ending a run that reached a cap on its calls ([`CallCaps`], or the
    /// runtime's ceiling).
    Calls,
}

impl FailureCause {
    /// The cause's serialized string, e.g. `compute`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Compute => "compute",
            Self::Wall => "wall",
            Self::Memory => "memory",
            Self::Stack => "stack",
            Self::Trap => "trap",
            Self::Preflight => "preflight",
            Self::Calls => "calls",
        }
    }
}

/// Misuse of the seam: the only reasons `run` returns `Err`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RunRejection {
    /// `run` was called after `dispose`.
    #[error("codemode: run() after disposal")]
    Disposed,
    /// The request's bindings failed [`validate_bindings`]; holds the reason.
    #[error("codemode: {0}")]
    InvalidBindings(String),
    /// The request asks for pausing calls or a resume the runtime cannot serve: it keeps no
    /// paused runs, or the record is unknown, already resumed, tampered with, from another
    /// build, or does not have the answered calls. Nothing ran; holds the reason.
    #[error("codemode: {0}")]
    Pause(String),
    /// The request's budgets are not usable budgets. Nothing ran.
    #[error("{0}")]
    Budgets(#[from] crate::budgets::BudgetError),
}

/// A sandbox that runs programs. Implementations: `codemode_host::WasmCodeRuntime`.
pub trait CodeRuntime: Send + Sync {
    /// The language programs are written in.
    fn language(&self) -> Language;
    /// How runs are isolated (`"wasm"`). Informational, not a security claim by itself.
    fn isolation(&self) -> &str;
    /// Runs one program. Resolves with every program outcome; rejects only on misuse.
    fn run(&self, request: RunRequest) -> BoxFuture<'_, Result<RunResult, RunRejection>>;
    /// Aborts in-flight runs with `runtime disposed`, waits until every one is gone, and makes
    /// later `run` calls fail with [`RunRejection::Disposed`].
    fn dispose(&self) -> BoxFuture<'_, ()>;
}

/// Globals a binding may not take: the console and names the sandboxes reserve.
pub const RESERVED_BINDING_GLOBALS: &[&str] = &[
    "console",
    "__dsh_main__",
    "__builtins__",
    "__name__",
    "__debug__",
];

/// Error-object members an error class may not use for the member name.
pub const RESERVED_ERROR_MEMBERS: &[&str] = &[
    "name",
    "message",
    "stack",
    "args",
    "with_traceback",
    "add_note",
];

/// ECMAScript reserved and strict-mode words, plus Python keywords and soft keywords: a binding
/// global must be usable as a plain identifier in both languages.
pub const PORTABLE_RESERVED_WORDS: &[&str] = &[
    // ECMAScript reserved words
    "await",
    "break",
    "case",
    "catch",
    "class",
    "const",
    "continue",
    "debugger",
    "default",
    "delete",
    "do",
    "else",
    "enum",
    "export",
    "extends",
    "false",
    "finally",
    "for",
    "function",
    "if",
    "import",
    "in",
    "instanceof",
    "new",
    "null",
    "return",
    "super",
    "switch",
    "this",
    "throw",
    "true",
    "try",
    "typeof",
    "var",
    "void",
    "while",
    "with",
    "yield",
    // ECMAScript strict-mode and contextual words
    "let",
    "static",
    "implements",
    "interface",
    "package",
    "private",
    "protected",
    "public",
    "arguments",
    "eval",
    "undefined",
    "NaN",
    "Infinity",
    // Python keywords
    "False",
    "None",
    "True",
    "and",
    "as",
    "assert",
    "async",
    "def",
    "del",
    "elif",
    "except",
    "from",
    "global",
    "is",
    "lambda",
    "nonlocal",
    "not",
    "or",
    "pass",
    "raise",
    // Python soft keywords
    "match",
    "type",
    "_",
];

fn is_portable_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    let head_ok = matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_');
    head_ok
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !PORTABLE_RESERVED_WORDS.contains(&name)
}

/// Whether `name` is a dunder (`__x__`), which no error class may use as its member property.
pub fn is_dunder(name: &str) -> bool {
    name.len() > 4 && name.starts_with("__") && name.ends_with("__")
}

/// Checks binding declarations with the reference's rules and messages (§1.3).
pub fn validate_bindings(bindings: &[BindingNamespace]) -> Result<(), RunRejection> {
    let reject = |m: String| Err(RunRejection::InvalidBindings(m));
    let mut globals = BTreeSet::new();
    for ns in bindings {
        let g = &ns.global;
        if !is_portable_identifier(g) {
            return reject(format!("binding global {g:?} is not a usable identifier"));
        }
        if RESERVED_BINDING_GLOBALS.contains(&g.as_str()) {
            return reject(format!("reserved binding global {g:?}"));
        }
        if !globals.insert(g.clone()) {
            return reject(format!("duplicate binding global {g:?}"));
        }
    }
    let mut injected = globals.clone();
    for ns in bindings {
        let Some(class) = &ns.error_class else {
            continue;
        };
        let n = &class.name;
        if !is_portable_identifier(n) {
            return reject(format!(
                "binding error class {n:?} is not a usable identifier"
            ));
        }
        if RESERVED_BINDING_GLOBALS.contains(&n.as_str()) {
            return reject(format!("reserved binding global {n:?}"));
        }
        if !injected.insert(n.clone()) {
            return reject(format!("duplicate injected global {n:?}"));
        }
        let p = &class.member_name_property;
        if p.is_empty() || RESERVED_ERROR_MEMBERS.contains(&p.as_str()) || is_dunder(p) {
            return reject(format!("binding error member property {p:?} is not usable"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ns(global: &str, class: Option<(&str, &str)>) -> BindingNamespace {
        BindingNamespace {
            global: global.into(),
            functions: BTreeMap::new(),
            error_class: class.map(|(n, p)| ErrorClass {
                name: n.into(),
                member_name_property: p.into(),
            }),
        }
    }

    fn message(bindings: &[BindingNamespace]) -> String {
        match validate_bindings(bindings) {
            Err(e) => e.to_string(),
            Ok(()) => "ok".into(),
        }
    }

    #[test]
    fn globals_must_be_portable_identifiers() {
        for bad in [
            "not valid!",
            "await",
            "$tools",
            "a$b",
            "lambda",
            "type",
            "_",
            "match",
            "None",
            "1x",
            "",
        ] {
            assert_eq!(
                message(&[ns(bad, None)]),
                format!("codemode: binding global {bad:?} is not a usable identifier"),
            );
        }
        assert_eq!(message(&[ns("tools", None)]), "ok");
        assert_eq!(message(&[ns("ToolCallError", None)]), "ok");
    }

    #[test]
    fn reserved_and_duplicate_globals_are_refused() {
        assert_eq!(
            message(&[ns("console", None)]),
            "codemode: reserved binding global \"console\""
        );
        assert_eq!(
            message(&[ns("tools", None), ns("tools", None)]),
            "codemode: duplicate binding global \"tools\""
        );
    }

    #[test]
    fn error_classes_are_checked() {
        let ok = message(&[ns("tools", Some(("ToolCallError", "toolName")))]);
        assert_eq!(ok, "ok");
        for bad in [
            "args",
            "__dict__",
            "message",
            "",
            "name",
            "stack",
            "with_traceback",
            "add_note",
        ] {
            assert_eq!(
                message(&[ns("tools", Some(("ToolCallError", bad)))]),
                format!("codemode: binding error member property {bad:?} is not usable")
            );
        }
        assert_eq!(
            message(&[ns("tools", Some(("__dsh_main__", "toolName")))]),
            "codemode: reserved binding global \"__dsh_main__\""
        );
        assert_eq!(
            message(&[ns("tools", Some(("tools", "toolName")))]),
            "codemode: duplicate injected global \"tools\""
        );
        assert_eq!(
            message(&[ns("a", Some(("E", "x"))), ns("b", Some(("E", "y"))),]),
            "codemode: duplicate injected global \"E\""
        );
        assert_eq!(
            message(&[ns("tools", Some(("not ok", "toolName")))]),
            "codemode: binding error class \"not ok\" is not a usable identifier"
        );
        // Any other string is a usable member property, identifiers or not.
        assert_eq!(message(&[ns("tools", Some(("E", "tool-name")))]), "ok");
    }

    #[test]
    fn dunder_matches_only_dunders() {
        assert!(is_dunder("__dict__"));
        assert!(!is_dunder("__x"));
        assert!(!is_dunder("____"));
        assert!(!is_dunder("x__"));
    }

    #[test]
    fn failures_serialize_with_reference_kinds() {
        let f = RunFailure::new(FailureKind::WorkerExit, "m").with_cause(FailureCause::Memory);
        let text = serde_json::to_string(&f).unwrap();
        assert_eq!(
            text,
            r#"{"kind":"worker-exit","message":"m","cause":"memory"}"#
        );
    }
}
