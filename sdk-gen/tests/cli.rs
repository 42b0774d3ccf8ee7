//! The `codemode-sdk` binary: what it prints, its exit codes and its error messages.

mod common;

use common::fixtures;
use std::io::Write;
use std::process::{Command, Output, Stdio};

fn codemode_sdk(args: &[&str], stdin: Option<&str>) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_codemode-sdk"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start codemode-sdk: {e}"));
    if let Some(mut pipe) = child.stdin.take() {
        if let Some(text) = stdin {
            // A process that fails before reading its input closes the pipe: not a test failure.
            match pipe.write_all(text.as_bytes()) {
                Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
                    panic!("cannot write stdin: {e}")
                }
                _ => {}
            }
        }
    }
    child
        .wait_with_output()
        .unwrap_or_else(|e| panic!("codemode-sdk did not finish: {e}"))
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn golden(name: &str) -> String {
    let path = fixtures().join("sdk").join("golden").join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

#[test]
fn prints_the_typescript_section_for_an_mcp_tools_list_file() {
    let input = fixtures().join("mcp-tools").join("server-memory.json");
    let output = codemode_sdk(&[&input.to_string_lossy()], None);
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert_eq!(stdout(&output), golden("server-memory.ts.md"));
}

#[test]
fn prints_the_python_section_and_reads_standard_input() {
    let input = fixtures().join("sdk").join("tools").join("sample.json");
    let text = std::fs::read_to_string(&input).unwrap_or_else(|e| panic!("{e}"));
    for args in [&["--lang", "python"][..], &["-", "--lang", "python"][..]] {
        let output = codemode_sdk(args, Some(&text));
        assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
        assert_eq!(stdout(&output), golden("sample.py.md"));
    }
}

#[test]
fn the_prefix_is_prepended_to_every_tool_name() {
    let tools = r#"[{"name": "read-file", "parameters": {}}, {"name": "list", "parameters": {}}]"#;
    let output = codemode_sdk(&["--prefix", "mcp__fs__"], Some(tools));
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let text = stdout(&output);
    assert!(text.contains("  mcp__fs__list: JsonObject;\n"), "{text}");
    assert!(
        text.contains("  \"mcp__fs__read-file\": JsonObject;\n"),
        "{text}"
    );
}

#[test]
fn bad_json_exits_2_with_the_position() {
    let output = codemode_sdk(&[], Some("[{\"name\": \"a\",]"));
    assert_eq!(output.status.code(), Some(2));
    let message = stderr(&output);
    assert!(
        message.starts_with("codemode-sdk: <stdin>: invalid JSON: ")
            && message.contains("line 1 column"),
        "{message}"
    );
    assert!(stdout(&output).is_empty());
}

#[test]
fn a_malformed_tool_exits_2_naming_the_tool_and_the_path() {
    let tools =
        r#"{"tools": [{"name": "ok", "inputSchema": {}}, {"name": "broken", "inputSchema": "x"}]}"#;
    let output = codemode_sdk(&[], Some(tools));
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(
        stderr(&output),
        "codemode-sdk: <stdin>: $.tools[1].inputSchema (tool \"broken\"): expected a JSON Schema (an object or a boolean)\n"
    );
}

#[test]
fn a_duplicate_name_exits_2_naming_both_places() {
    let tools = r#"[{"name": "a", "parameters": {}}, {"name": "b", "parameters": {}}, {"name": "a", "parameters": {}}]"#;
    let output = codemode_sdk(&[], Some(tools));
    assert_eq!(output.status.code(), Some(2));
    assert_eq!(
        stderr(&output),
        "codemode-sdk: <stdin>: $[2]: duplicate tool name \"a\" (first at $[0])\n"
    );
}

#[test]
fn an_unreadable_file_exits_2_naming_it() {
    let output = codemode_sdk(&["/nonexistent/tools.json"], None);
    assert_eq!(output.status.code(), Some(2));
    let message = stderr(&output);
    assert!(
        message.starts_with("codemode-sdk: cannot read /nonexistent/tools.json: "),
        "{message}"
    );
}

#[test]
fn the_wrong_shape_exits_2_saying_what_is_accepted() {
    let output = codemode_sdk(&[], Some(r#"{"name": "a"}"#));
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("expected a JSON array of tools or an MCP tools/list result"));
}

#[test]
fn an_unknown_language_is_a_usage_error() {
    let output = codemode_sdk(&["--lang", "rust"], Some("[]"));
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("invalid value 'rust'"),
        "{}",
        stderr(&output)
    );
}
