//! Session events: the JSONL writer, replay, and the recorder of top-level calls.

mod tools_support;

use std::io::Cursor;
use std::sync::{Arc, Mutex};

use codemode_runtime::tools::events::{read_jsonl, record};
use codemode_runtime::tools::*;
use serde_json::{json, Value};
use tools_support::{echo, input, keep, run};

/// A sink that keeps events in memory.
#[derive(Default)]
struct Memory(Mutex<Vec<SessionEvent>>);

impl EventSink for Memory {
    fn append(&self, event: &SessionEvent) -> std::io::Result<()> {
        self.0.lock().unwrap().push(event.clone());
        Ok(())
    }
}

#[derive(Clone, Default)]
struct SharedBuffer(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for SharedBuffer {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn records_a_call_and_its_result_for_top_level_calls() {
    let registry = Registry::new();
    registry.register(echo("echo"), None).unwrap().keep();
    let memory = Arc::new(Memory::default());
    let _recording = record(&registry, memory.clone());
    let agent = AgentScope::root();
    registry
        .execute(input("echo", json!({"text": "hi"})).agent(&agent))
        .await;
    let events = memory.0.lock().unwrap().clone();
    assert_eq!(
        events.iter().map(SessionEvent::kind).collect::<Vec<_>>(),
        ["tool/call", "tool/result"]
    );
    match &events[0] {
        SessionEvent::ToolCall {
            call_id,
            root_call_id,
            name,
            arguments,
            agent: who,
            ..
        } => {
            assert_eq!(
                (call_id.as_str(), root_call_id.as_str(), name.as_str()),
                ("call-1", "call-1", "echo")
            );
            assert_eq!(**arguments, json!({"text": "hi"}));
            assert_eq!(*who, Some(agent.id()));
        }
        other => panic!("unexpected {other:?}"),
    }
    match &events[1] {
        SessionEvent::ToolResult {
            is_error,
            content,
            error,
            ..
        } => {
            assert!(!is_error);
            assert_eq!(content, &vec![ContentBlock::text("hi")]);
            assert!(error.is_none());
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[tokio::test]
async fn nested_calls_are_left_to_the_code_dispatch_events() {
    let registry = Registry::new();
    registry.register(echo("echo"), None).unwrap().keep();
    let token = Arc::new(Mutex::new(None));
    let t = token.clone();
    let _probe = registry.on_call(move |call| *t.lock().unwrap() = Some(call.token()));
    run(&registry, "echo", json!({})).await;
    let parent = token.lock().unwrap().take().unwrap();
    let memory = Arc::new(Memory::default());
    let _recording = record(&registry, memory.clone());
    registry
        .execute(input("echo", json!({})).parent(parent))
        .await;
    assert!(memory.0.lock().unwrap().is_empty());
}

#[tokio::test]
async fn jsonl_round_trips_every_event_kind() {
    let registry = Registry::new();
    keep(
        &registry,
        tools_support::tool("boom", |_, _| async {
            Err(ToolError::coded("X", "CODE", "bad"))
        }),
    );
    let buffer = SharedBuffer::default();
    let writer = Arc::new(JsonlWriter::new(buffer.clone()));
    let _recording = record(&registry, writer.clone());
    run(&registry, "boom", json!({"n": 1.5})).await;
    let arguments = Arc::new(json!({"q": [1, "two"]}));
    let start = SessionEvent::CodeDispatchStart {
        time: 1,
        root_call_id: "call-1".into(),
        parent_call_id: "call-1".into(),
        sub_call_id: "call-1:code:1".into(),
        name: "echo".into(),
        arguments: arguments.clone(),
    };
    let settle = SessionEvent::CodeDispatch {
        time: 2,
        root_call_id: "call-1".into(),
        parent_call_id: "call-1".into(),
        sub_call_id: "call-1:code:1".into(),
        name: "echo".into(),
        arguments,
        is_error: false,
        content: vec![ContentBlock::Image {
            data: "AA==".into(),
            mime_type: "image/png".into(),
        }],
        duration_ms: 7,
    };
    writer.append(&start).unwrap();
    writer.append(&settle).unwrap();
    let bytes = buffer.0.lock().unwrap().clone();
    let text = String::from_utf8(bytes).unwrap();
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines[0]["type"], "tool/call");
    assert_eq!(lines[0]["arguments"], json!({"n": 1.5}));
    assert_eq!(lines[1]["type"], "tool/result");
    assert_eq!(lines[1]["isError"], true);
    assert_eq!(
        lines[1]["error"],
        json!({"message": "bad", "info": {"name": "X", "code": "CODE"}})
    );
    assert!(lines[1]["durationMs"].is_u64(), "{}", lines[1]);
    assert_eq!(lines[2]["subCallId"], "call-1:code:1");
    assert_eq!(lines[3]["durationMs"], 7);
    assert_eq!(
        lines[3]["content"],
        json!([{"type": "image", "data": "AA==", "mimeType": "image/png"}])
    );
    let replayed = read_jsonl(Cursor::new(text)).unwrap();
    assert_eq!(replayed.len(), 4);
    assert_eq!(replayed[2], start);
    assert_eq!(replayed[3], settle);
    match &replayed[1] {
        SessionEvent::ToolResult {
            error: Some(failure),
            ..
        } => assert_eq!(failure.message, "bad"),
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn deep_arguments_are_written_without_recursion_and_refused_cleanly_on_replay() {
    let mut arguments = json!(1);
    for _ in 0..5_000 {
        arguments = Value::Array(vec![arguments]);
    }
    let event = SessionEvent::ToolCall {
        time: 0,
        call_id: "c".into(),
        root_call_id: "c".into(),
        name: "t".into(),
        arguments: Arc::new(arguments),
        agent: None,
    };
    let line = event.to_json_line();
    assert!(line.contains(&"[".repeat(5_000)));
    assert!(SessionEvent::from_json_line(&line).is_err());
    if let SessionEvent::ToolCall { arguments, .. } = event {
        // Take the deep value apart by move; `Value`'s own drop would recurse per level.
        let mut pending = vec![Arc::try_unwrap(arguments).unwrap()];
        while let Some(next) = pending.pop() {
            if let Value::Array(items) = next {
                pending.extend(items);
            }
        }
    }
}

#[test]
fn malformed_lines_are_errors_not_panics() {
    for line in [
        "",
        "{",
        "[]",
        "{\"type\":\"nope\"}",
        "{\"type\":\"tool/call\"}",
    ] {
        assert!(SessionEvent::from_json_line(line).is_err(), "{line}");
    }
}
