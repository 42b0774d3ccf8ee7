//! The built-in tools of `codemode run`, as ordinary registered tools: `echo`, `sleep`, `fail`,
//! and read-only `read_file` / `list_dir` confined to a root directory.
//!
//! `sleep`, `read_file` and `list_dir` are concurrency-safe (calls overlap under
//! `Promise.all`); `echo` and `fail` are exclusive: they stand in for tools with side effects,
//! which run one at a time.
//!
//! File access goes through capability handles (`cap-std`): every path is resolved beneath the
//! root's directory handle, so `..`, absolute paths and symlinks that leave the root are refused
//! by construction, not by string checks.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use cap_std::ambient_authority;
use cap_std::fs::{Dir, OpenOptions, OpenOptionsExt};
use codemode_runtime::json;
use codemode_runtime::tools::schema::dsl::{array, number, object, string, Annotate, Parameters};
use codemode_runtime::tools::{
    ContentBlock, RegistrationGuard, Registry, RegistryError, Schema, ToolDefinition, ToolError,
    ToolOutput,
};
use serde_json::{json, Value};

/// Largest file `read_file` returns.
pub const MAX_READ_BYTES: u64 = 16 * 1024 * 1024;

/// Most entries `list_dir` returns: a listing is held whole before the program sees it.
pub const MAX_LIST_ENTRIES: usize = 100_000;
/// Longest `sleep`.
pub const MAX_SLEEP_MS: u64 = 24 * 60 * 60 * 1000;

/// Content for the model: strings as they are, anything else as JSON.
fn render(_args: &Value, value: &Value) -> Result<Vec<ContentBlock>, ToolError> {
    Ok(vec![ContentBlock::text(match value {
        Value::String(text) => text.clone(),
        other => json::to_string(other),
    })])
}

fn schema(result: Result<Schema, codemode_runtime::tools::SchemaError>) -> Schema {
    // Every schema here is a literal of the DSL, checked by the registration test.
    result.unwrap_or_else(|_| Schema::empty_parameters())
}

fn echo() -> ToolDefinition {
    ToolDefinition::builder("echo")
        .description("Return the arguments unchanged. Runs alone, like a tool with side effects.")
        .output(ToolOutput::new(schema(Schema::value(object(true))), render))
        .execute(|args, _ctx| async move { Ok(json::clone_deep(&args)) })
        .build()
}

fn sleep() -> ToolDefinition {
    let parameters = Parameters::new().required(
        "ms",
        number().description(format!("Milliseconds to wait, 0 to {MAX_SLEEP_MS}.")),
    );
    ToolDefinition::builder("sleep")
        .description("Wait the given number of milliseconds; safe to run concurrently.")
        .parameters(schema(Schema::parameters(parameters)))
        .output(ToolOutput::new(
            schema(Schema::value(object(false).required("slept", number()))),
            render,
        ))
        .concurrency_safe(|_| true)
        .execute(|args, ctx| async move {
            let ms = args.get("ms").and_then(Value::as_f64).unwrap_or(-1.0);
            if !(0.0..=MAX_SLEEP_MS as f64).contains(&ms) {
                return Err(ToolError::invalid_arguments(format!(
                    "\"ms\" must be between 0 and {MAX_SLEEP_MS}"
                )));
            }
            tokio::select! {
                () = tokio::time::sleep(Duration::from_secs_f64(ms / 1000.0)) => {
                    Ok(json!({ "slept": args["ms"].clone() }))
                }
                reason = ctx.signal().aborted() => Err(ToolError::new(format!("sleep aborted: {reason}"))),
            }
        })
        .build()
}

fn fail() -> ToolDefinition {
    ToolDefinition::builder("fail")
        .description("Fail with the given message (the program sees a ToolCallError). Runs alone, like a tool with side effects.")
        .parameters(schema(Schema::parameters(
            Parameters::new().required("message", string()),
        )))
        .output(ToolOutput::new(
            schema(Schema::value(codemode_runtime::tools::schema::dsl::null())),
            render,
        ))
        .execute(|args, _ctx| async move {
            let message = args.get("message").and_then(Value::as_str).unwrap_or("");
            Err(ToolError::new(message))
        })
        .build()
}

fn path_parameters() -> Schema {
    schema(Schema::parameters(Parameters::new().required(
        "path",
        string().description("Path relative to the root directory."),
    )))
}

fn open_root(root: &Path) -> Result<Dir, ToolError> {
    Dir::open_ambient_dir(root, ambient_authority())
        .map_err(|e| ToolError::new(format!("cannot open root {}: {e}", root.display())))
}

fn relative(path: &str) -> Result<PathBuf, ToolError> {
    if path.is_empty() {
        return Ok(PathBuf::from("."));
    }
    let p = PathBuf::from(path);
    if p.is_absolute() {
        return Err(ToolError::new(format!(
            "{path}: absolute paths are outside the root; use a path relative to it"
        )));
    }
    Ok(p)
}

fn path_arg(args: &Value) -> String {
    args.get("path")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
}

fn read_file(root: Arc<PathBuf>) -> ToolDefinition {
    ToolDefinition::builder("read_file")
        .description("Read a UTF-8 text file under the root directory.")
        .parameters(path_parameters())
        .output(ToolOutput::new(schema(Schema::value(string())), render))
        .concurrency_safe(|_| true)
        .execute(move |args, _ctx| {
            let root = root.clone();
            async move {
                let path = path_arg(&args);
                tokio::task::spawn_blocking(move || read_text(&root, &path))
                    .await
                    .map_err(|e| ToolError::new(format!("read_file failed: {e}")))?
            }
        })
        .build()
}

/// Reads one regular file through a single handle, never more than the cap. The handle is
/// opened without blocking (a FIFO with no writer would block `open` forever, out of reach of
/// any abort) and checked on the handle itself, so a path swapped between a check and the open
/// cannot slip a FIFO or a device (which never ends) past it.
fn read_text(root: &Path, path: &str) -> Result<Value, ToolError> {
    let fail = |e: std::io::Error| ToolError::new(format!("{path}: {e}"));
    let dir = open_root(root)?;
    let rel = relative(path)?;
    let mut options = OpenOptions::new();
    options.read(true);
    options.custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY);
    let file = dir.open_with(&rel, &options).map_err(fail)?;
    let kind = file.metadata().map_err(fail)?;
    if kind.is_dir() {
        return Err(ToolError::new(format!(
            "{path}: is a directory; use list_dir to see its entries"
        )));
    }
    if !kind.is_file() {
        return Err(ToolError::new(format!(
            "{path}: not a regular file (a FIFO, socket or device); read_file reads regular files only"
        )));
    }
    // Sized from the handle, so a file read whole is one buffer, not the doublings that found
    // its size; the size is only a hint (the file may change), the cap still holds.
    let hint = kind.len().min(MAX_READ_BYTES) as usize + 1;
    let mut bytes = Vec::with_capacity(hint);
    file.take(MAX_READ_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(fail)?;
    if bytes.len() as u64 > MAX_READ_BYTES {
        return Err(ToolError::new(format!(
            "{path}: larger than {MAX_READ_BYTES} bytes"
        )));
    }
    // Valid UTF-8 (the usual case) becomes the string in place, without a copy.
    let text = String::from_utf8(bytes)
        .unwrap_or_else(|invalid| String::from_utf8_lossy(invalid.as_bytes()).into_owned());
    Ok(Value::String(text))
}

fn list_dir(root: Arc<PathBuf>) -> ToolDefinition {
    let entry = object(false).required("name", string()).required(
        "kind",
        string().enum_values(["file", "dir", "symlink", "other"]),
    );
    ToolDefinition::builder("list_dir")
        .description("List a directory under the root, sorted by name.")
        .parameters(path_parameters())
        .output(ToolOutput::new(schema(Schema::value(array(entry))), render))
        .concurrency_safe(|_| true)
        .execute(move |args, _ctx| {
            let root = root.clone();
            async move {
                let path = path_arg(&args);
                tokio::task::spawn_blocking(move || list(&root, &path))
                    .await
                    .map_err(|e| ToolError::new(format!("list_dir failed: {e}")))?
            }
        })
        .build()
}

fn list(root: &Path, path: &str) -> Result<Value, ToolError> {
    let fail = |e: std::io::Error| ToolError::new(format!("{path}: {e}"));
    let dir = open_root(root)?;
    let rel = relative(path)?;
    let sub = dir.open_dir(&rel).map_err(fail)?;
    let mut entries = Vec::new();
    for entry in sub.entries().map_err(fail)? {
        let entry = entry.map_err(fail)?;
        if entries.len() == MAX_LIST_ENTRIES {
            return Err(ToolError::new(format!(
                "{path}: more than {MAX_LIST_ENTRIES} entries; list a subdirectory instead"
            )));
        }
        let name = entry.file_name().to_string_lossy().into_owned();
        let kind = match entry.file_type() {
            Ok(t) if t.is_dir() => "dir",
            Ok(t) if t.is_file() => "file",
            Ok(t) if t.is_symlink() => "symlink",
            _ => "other",
        };
        entries.push((name, kind));
    }
    entries.sort();
    Ok(Value::Array(
        entries
            .into_iter()
            .map(|(name, kind)| json!({ "name": name, "kind": kind }))
            .collect(),
    ))
}

/// The built-in tools, with file access confined to `root`.
pub fn definitions(root: impl Into<PathBuf>) -> Vec<ToolDefinition> {
    let root = Arc::new(root.into());
    vec![
        echo(),
        sleep(),
        fail(),
        read_file(root.clone()),
        list_dir(root),
    ]
}

/// Registers the built-in tools globally on `registry`; dropping the guard removes them.
pub fn register(
    registry: &Registry,
    root: impl Into<PathBuf>,
) -> Result<RegistrationGuard, RegistryError> {
    registry.register_all(definitions(root), None)
}
