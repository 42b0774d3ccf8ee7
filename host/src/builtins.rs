//! The built-in tools `codemode run` binds as `tools`: `echo`, `sleep`, `fail`, and read-only
//! `read_file` / `list_dir` confined to a root directory.
//!
//! File access goes through capability handles (`cap-std`): every path is resolved beneath the
//! root's directory handle, so `..`, absolute paths and symlinks that leave the root are refused
//! by construction, not by string checks.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use cap_std::ambient_authority;
use cap_std::fs::Dir;
use codemode_runtime::code::{binding, BindingFn, BindingNamespace, ErrorClass};
use serde_json::{json, Value};

/// Largest file `read_file` returns.
pub const MAX_READ_BYTES: u64 = 16 * 1024 * 1024;
/// Longest `sleep`.
pub const MAX_SLEEP_MS: u64 = 24 * 60 * 60 * 1000;

fn string_arg(args: &Value, key: &str) -> Result<String, String> {
    match args.get(key) {
        Some(Value::String(s)) => Ok(s.clone()),
        Some(_) => Err(format!("invalid arguments: \"{key}\" must be a string")),
        None => Err(format!(
            "invalid arguments: missing required property \"{key}\""
        )),
    }
}

fn echo() -> BindingFn {
    binding(|args, _signal| async move { Ok(args) })
}

fn sleep() -> BindingFn {
    binding(|args, signal| async move {
        let ms = match args.get("ms") {
            Some(Value::Number(n)) => n.as_f64().unwrap_or(-1.0),
            Some(_) => return Err("invalid arguments: \"ms\" must be a number".into()),
            None => return Err("invalid arguments: missing required property \"ms\"".into()),
        };
        if !(0.0..=MAX_SLEEP_MS as f64).contains(&ms) {
            return Err(format!(
                "invalid arguments: \"ms\" must be between 0 and {MAX_SLEEP_MS}"
            ));
        }
        tokio::select! {
            () = tokio::time::sleep(Duration::from_secs_f64(ms / 1000.0)) => {
                Ok(json!({ "slept": args["ms"].clone() }))
            }
            reason = signal.aborted() => Err(format!("sleep aborted: {reason}")),
        }
    })
}

fn fail() -> BindingFn {
    binding(|args, _signal| async move {
        Err(match args.get("message") {
            Some(Value::String(s)) => s.clone(),
            _ => "fail called without a message".into(),
        })
    })
}

fn open_root(root: &Path) -> Result<Dir, String> {
    Dir::open_ambient_dir(root, ambient_authority())
        .map_err(|e| format!("cannot open root {}: {e}", root.display()))
}

fn relative(path: &str) -> Result<PathBuf, String> {
    if path.is_empty() {
        return Ok(PathBuf::from("."));
    }
    let p = PathBuf::from(path);
    if p.is_absolute() {
        return Err(format!(
            "{path}: absolute paths are outside the root; use a path relative to it"
        ));
    }
    Ok(p)
}

fn read_file(root: Arc<PathBuf>) -> BindingFn {
    binding(move |args, _signal| {
        let root = root.clone();
        async move {
            let path = string_arg(&args, "path")?;
            tokio::task::spawn_blocking(move || {
                let dir = open_root(&root)?;
                let rel = relative(&path)?;
                let file = dir.open(&rel).map_err(|e| format!("{path}: {e}"))?;
                let meta = file.metadata().map_err(|e| format!("{path}: {e}"))?;
                if meta.is_dir() {
                    return Err(format!("{path}: is a directory"));
                }
                if meta.len() > MAX_READ_BYTES {
                    return Err(format!("{path}: larger than {MAX_READ_BYTES} bytes"));
                }
                let bytes = dir.read(&rel).map_err(|e| format!("{path}: {e}"))?;
                Ok(Value::String(String::from_utf8_lossy(&bytes).into_owned()))
            })
            .await
            .map_err(|e| format!("read_file failed: {e}"))?
        }
    })
}

fn list_dir(root: Arc<PathBuf>) -> BindingFn {
    binding(move |args, _signal| {
        let root = root.clone();
        async move {
            let path = string_arg(&args, "path")?;
            tokio::task::spawn_blocking(move || {
                let dir = open_root(&root)?;
                let rel = relative(&path)?;
                let sub = dir.open_dir(&rel).map_err(|e| format!("{path}: {e}"))?;
                let mut entries = Vec::new();
                for entry in sub.entries().map_err(|e| format!("{path}: {e}"))? {
                    let entry = entry.map_err(|e| format!("{path}: {e}"))?;
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
            })
            .await
            .map_err(|e| format!("list_dir failed: {e}"))?
        }
    })
}

/// The built-in tools' schemas (name, description, parameters, output), for the SDK text.
pub fn schemas() -> Value {
    let path_arg = json!({
        "type": "object",
        "properties": {"path": {"type": "string", "description": "Path relative to the root directory."}},
        "required": ["path"]
    });
    json!([
        {
            "name": "echo",
            "description": "Return the arguments unchanged.",
            "parameters": {"type": "object"},
            "output": {"type": "object"}
        },
        {
            "name": "sleep",
            "description": "Wait the given number of milliseconds; safe to run concurrently.",
            "parameters": {
                "type": "object",
                "properties": {"ms": {"type": "number", "description": "Milliseconds to wait."}},
                "required": ["ms"]
            },
            "output": {
                "type": "object",
                "properties": {"slept": {"type": "number"}},
                "required": ["slept"],
                "additionalProperties": false
            }
        },
        {
            "name": "fail",
            "description": "Fail with the given message (raises ToolCallError).",
            "parameters": {
                "type": "object",
                "properties": {"message": {"type": "string"}},
                "required": ["message"]
            },
            "output": {"type": "null"}
        },
        {
            "name": "read_file",
            "description": "Read a UTF-8 text file under the root directory.",
            "parameters": path_arg,
            "output": {"type": "string"}
        },
        {
            "name": "list_dir",
            "description": "List a directory under the root, sorted by name.",
            "parameters": path_arg,
            "output": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "name": {"type": "string"},
                        "kind": {"enum": ["file", "dir", "symlink", "other"], "type": "string"}
                    },
                    "required": ["name", "kind"],
                    "additionalProperties": false
                }
            }
        }
    ])
}

/// `functions` as the `tools` namespace, with `ToolCallError` / `toolName`.
pub fn tools_namespace(functions: BTreeMap<String, BindingFn>) -> BindingNamespace {
    BindingNamespace {
        global: "tools".into(),
        functions,
        error_class: Some(ErrorClass {
            name: "ToolCallError".into(),
            member_name_property: "toolName".into(),
        }),
    }
}

/// The built-in tools as the `tools` namespace.
pub fn namespace(root: impl Into<PathBuf>) -> BindingNamespace {
    let root = Arc::new(root.into());
    let mut functions = BTreeMap::new();
    functions.insert("echo".to_owned(), echo());
    functions.insert("sleep".to_owned(), sleep());
    functions.insert("fail".to_owned(), fail());
    functions.insert("read_file".to_owned(), read_file(root.clone()));
    functions.insert("list_dir".to_owned(), list_dir(root));
    tools_namespace(functions)
}
