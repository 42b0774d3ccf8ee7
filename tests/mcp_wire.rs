//! MCP 2026-07-28 over plain HTTP/1.1 sockets, for the end-to-end tests of `codemode mcp
//! --http`: each request stands alone (no session), carrying the protocol version and the
//! client's capabilities, as a client of that version sends it; the answer is read whole,
//! from a JSON body or an event stream, chunked or not.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use serde_json::{json, Value};

const VERSION: &str = "2026-07-28";
const TASKS: &str = "io.modelcontextprotocol/tasks";

/// A client of one server: its address, the bearer token it presents (if any), and whether it
/// declares the tasks extension.
#[derive(Clone, Debug)]
pub struct Client {
    pub addr: SocketAddr,
    pub token: Option<String>,
    pub tasks: bool,
}

impl Client {
    pub fn new(addr: SocketAddr) -> Self {
        Self {
            addr,
            token: None,
            tasks: false,
        }
    }

    pub fn with_token(mut self, token: &str) -> Self {
        self.token = Some(token.to_owned());
        self
    }

    pub fn with_tasks(mut self) -> Self {
        self.tasks = true;
        self
    }

    /// Sends `method` with `params` (its `_meta` added); returns the JSON-RPC `result`, or
    /// `{"error": …}` for an error answer.
    pub fn request(&self, method: &str, mut params: Value, name: &str) -> Value {
        let mut capabilities = json!({"elicitation": {"form": {}}});
        if self.tasks {
            capabilities["extensions"] = json!({TASKS: {}});
        }
        params["_meta"] = json!({
            "io.modelcontextprotocol/protocolVersion": VERSION,
            "io.modelcontextprotocol/clientCapabilities": capabilities,
            "io.modelcontextprotocol/clientInfo": {"name": "e2e", "version": "1"},
        });
        let body =
            json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params}).to_string();
        let mut head = format!(
            "POST /mcp HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMCP-Protocol-Version: {VERSION}\r\nMcp-Method: {method}\r\nMcp-Name: {name}\r\nContent-Length: {}\r\nConnection: close\r\n",
            self.addr,
            body.len()
        );
        if let Some(token) = &self.token {
            head.push_str(&format!("Authorization: Bearer {token}\r\n"));
        }
        head.push_str("\r\n");
        let mut stream = TcpStream::connect(self.addr).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(120)))
            .expect("read timeout");
        stream
            .write_all(format!("{head}{body}").as_bytes())
            .expect("send");
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).expect("read the answer");
        answer_of(&answer)
    }

    /// `tools/call` of `run_code` with `arguments`, and `extra` fields beside them (a retry's
    /// `requestState` and `inputResponses`).
    pub fn run_code(&self, arguments: &Value, extra: Value) -> Value {
        let mut params = json!({"name": "run_code", "arguments": arguments});
        if let (Some(params), Value::Object(extra)) = (params.as_object_mut(), extra) {
            params.extend(extra);
        }
        self.request("tools/call", params, "run_code")
    }

    /// `tasks/get` of `task_id`.
    pub fn task(&self, task_id: &str) -> Value {
        self.request("tasks/get", json!({"taskId": task_id}), task_id)
    }
}

/// The JSON-RPC answer in a whole HTTP response.
fn answer_of(response: &[u8]) -> Value {
    let split = response
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or(response.len());
    let head = String::from_utf8_lossy(&response[..split]).to_ascii_lowercase();
    let body = response.get(split + 4..).unwrap_or_default();
    let status = head.split(' ').nth(1).unwrap_or_default().to_owned();
    let body = if head.contains("transfer-encoding: chunked") {
        unchunk(body)
    } else {
        body.to_vec()
    };
    let body = String::from_utf8_lossy(&body);
    let messages: Vec<Value> = if head.contains("text/event-stream") {
        body.lines()
            .filter_map(|line| line.strip_prefix("data:"))
            .filter_map(|data| serde_json::from_str(data.trim()).ok())
            .collect()
    } else {
        serde_json::from_str(&body).into_iter().collect()
    };
    for message in messages {
        if message.get("id") == Some(&json!(7)) {
            if let Some(result) = message.get("result") {
                return result.clone();
            }
            return json!({"error": message.get("error")});
        }
    }
    json!({"error": {"message": format!("HTTP {status} without an answer: {body}")}})
}

/// A chunked body, joined.
fn unchunk(mut body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(end) = body.windows(2).position(|w| w == b"\r\n") {
        let size = std::str::from_utf8(&body[..end])
            .ok()
            .and_then(|size| usize::from_str_radix(size.trim(), 16).ok());
        let rest = &body[end + 2..];
        let Some(size) = size.filter(|&size| size > 0 && size <= rest.len()) else {
            break;
        };
        out.extend_from_slice(&rest[..size]);
        body = rest[size..].strip_prefix(b"\r\n").unwrap_or(&rest[size..]);
    }
    out
}
