//! A paused run put to the MCP client as questions, and the client's answers as the replies
//! the run resumes with.
//!
//! Each pending call becomes a form elicitation keyed by its kind and call id: an approval
//! (`approval:ID`; accept makes the call, decline denies it, cancel withdraws it) or the reply
//! to a pausing call (`reply:ID`; the accepted content's `reply` is the call's JSON value). A
//! client of MCP 2026-07-28 gets them in an input-required result and retries the call with
//! its answers; an older client is asked on its session. Keys carry everything an answer
//! needs, so answers are read without the record, on any replica.

use std::collections::BTreeMap;

use codemode_runtime::code::{PausedRun, Reply};
use codemode_runtime::json;
use codemode_runtime::tools::ApprovalScope;
use rmcp::model::{InputRequiredResult, InputResponses};
use rmcp::ErrorData as McpError;
use serde_json::{json, Value};

/// Longest argument preview shown in a question.
const PREVIEW_CHARS: usize = 400;

/// A pause as `run_code` reports it (`{runId, pending: [{callId, tool, arguments,
/// approval?}]}`).
#[derive(Debug)]
pub(crate) struct Pause {
    pub(crate) run_id: String,
    pending: Vec<Pending>,
}

#[derive(Debug)]
struct Pending {
    call_id: String,
    tool: String,
    arguments: Value,
    approval: bool,
    /// The questions of a call that needs a person's input, by key.
    questions: Option<BTreeMap<String, Value>>,
}

/// The approvals `replies` answer for the rest of the session (`scope` `session`): each tool
/// and whether it is allowed.
pub(crate) fn for_the_session<'p>(
    pause: &'p Pause,
    replies: &[(String, Reply)],
) -> Vec<(&'p str, bool)> {
    replies
        .iter()
        .filter_map(|(call_id, reply)| {
            let Ok(Value::Object(answer)) = reply else {
                return None;
            };
            if answer.get("scope").and_then(Value::as_str) != Some("session") {
                return None;
            }
            let allowed = answer.get("approved")?.as_bool()?;
            let call = pause
                .pending
                .iter()
                .find(|c| c.approval && c.call_id == *call_id)?;
            Some((call.tool.as_str(), allowed))
        })
        .collect()
}

/// The questions a paused run puts, its pending calls named as the SDK names their tools.
pub(crate) fn paused(paused: &PausedRun) -> Pause {
    let pending = paused
        .pending
        .iter()
        .map(|call| Pending {
            call_id: call.call_id.clone(),
            tool: if call.global == "tools" {
                call.name.clone()
            } else {
                format!("{}.{}", call.global, call.name)
            },
            arguments: json::clone_deep(&call.arguments),
            approval: call.approval,
            questions: call.questions.as_ref().map(|questions| {
                questions
                    .iter()
                    .map(|(key, question)| (key.clone(), json::clone_deep(question)))
                    .collect()
            }),
        })
        .collect();
    Pause {
        run_id: paused.run_id.clone(),
        pending,
    }
}

const APPROVAL: &str = "approval:";

/// The form field an approval's answer may scope itself with.
pub(crate) static SCOPE_FIELD: std::sync::LazyLock<Value> = std::sync::LazyLock::new(|| {
    json!({
        "type": "string",
        "title": "For",
        "description": "How far the answer reaches: this call, every call of this tool for the rest of this run, or for the rest of this session.",
        "enum": ["call", "run", "session"],
        "default": "call",
    })
});
const REPLY: &str = "reply:";
const INPUT: &str = "input:";

/// The elicitation (`elicitation/create` params) for each pending call, by key; a call that
/// needs input asks its own questions (`input:ID:KEY`), each message saying which tool asks.
pub(crate) fn questions(pause: &Pause) -> BTreeMap<String, Value> {
    let asked = pause.pending.iter().flat_map(|call| {
        call.questions.iter().flatten().map(|(key, question)| {
            let mut question = json::clone_deep(question);
            if let Some(Value::String(message)) = question.get_mut("message") {
                *message = format!("Tool \"{}\" asks: {message}", call.tool);
            }
            (format!("{INPUT}{}:{key}", call.call_id), question)
        })
    });
    let answered = pause
        .pending
        .iter()
        .filter(|call| call.questions.is_none())
        .map(|call| {
            let mut arguments = json::to_string(&call.arguments);
            if arguments.chars().count() > PREVIEW_CHARS {
                arguments = arguments.chars().take(PREVIEW_CHARS).collect::<String>() + "…";
            }
            if call.approval {
                let params = json!({
                    "mode": "form",
                    "message": format!("Allow tool \"{}\" with {arguments}?", call.tool),
                    "requestedSchema": {"type": "object", "properties": {"scope": SCOPE_FIELD.clone()}},
                });
                (format!("{APPROVAL}{}", call.call_id), params)
            } else {
                let params = json!({
                    "mode": "form",
                    "message": format!(
                        "The program called tool \"{}\" with {arguments}. What does the call return?",
                        call.tool
                    ),
                    "requestedSchema": {
                        "type": "object",
                        "properties": {"reply": {
                            "type": "string",
                            "title": "Reply",
                            "description": format!("The JSON value tool \"{}\" returns to the program, e.g. {{\"ok\": true}} or \"done\"", call.tool),
                        }},
                        "required": ["reply"],
                    },
                });
                (format!("{REPLY}{}", call.call_id), params)
            }
        });
    asked.chain(answered).collect()
}

/// The input-required result asking `questions`, with `state` to be echoed on the retry.
pub(crate) fn input_required(
    questions: &BTreeMap<String, Value>,
    state: String,
) -> Result<InputRequiredResult, McpError> {
    let requests: serde_json::Map<String, Value> = questions
        .iter()
        .map(|(key, params)| {
            let request = json!({"method": "elicitation/create", "params": params});
            (key.clone(), request)
        })
        .collect();
    serde_json::from_value(json!({
        "resultType": "input_required",
        "inputRequests": requests,
        "requestState": state,
    }))
    .map_err(|e| McpError::internal_error(format!("codemode: {e}"), None))
}

/// The replies `responses` (elicitation results by key) give the pending calls.
pub(crate) fn replies(responses: &InputResponses) -> Result<Vec<(String, Reply)>, McpError> {
    let mut replies = Vec::new();
    // A call's answers to its own questions, gathered into one reply: `{KEY: result}`.
    let mut inputs: BTreeMap<String, serde_json::Map<String, Value>> = BTreeMap::new();
    for (key, response) in responses {
        let refused =
            |why: &str| McpError::invalid_params(format!("inputResponses[{key:?}]: {why}"), None);
        let action = response
            .get("action")
            .and_then(Value::as_str)
            .ok_or_else(|| refused("expected an elicitation result, {\"action\": …}"))?;
        if let Some(call_id) = key.strip_prefix(APPROVAL) {
            let scope = match response.get("content").and_then(|c| c.get("scope")) {
                None | Some(Value::Null) => None,
                Some(Value::String(scope)) => {
                    ApprovalScope::parse(scope).map_err(|e| refused(&e))?
                }
                Some(_) => return Err(refused("scope must be \"call\", \"run\" or \"session\"")),
            };
            let decided = |approved: bool| match scope {
                None => Value::Bool(approved),
                Some(scope) => json!({"approved": approved, "scope": scope.as_str()}),
            };
            let reply = match action {
                "accept" => Ok(decided(true)),
                "decline" => Ok(decided(false)),
                "cancel" => Err("the approval was cancelled".to_owned()),
                _ => return Err(refused("the action must be accept, decline or cancel")),
            };
            replies.push((call_id.to_owned(), reply));
        } else if let Some((call_id, question)) = key
            .strip_prefix(INPUT)
            .and_then(|rest| rest.split_once(':'))
        {
            if !["accept", "decline", "cancel"].contains(&action) {
                return Err(refused("the action must be accept, decline or cancel"));
            }
            inputs
                .entry(call_id.to_owned())
                .or_default()
                .insert(question.to_owned(), json::clone_deep(response));
        } else if let Some(call_id) = key.strip_prefix(REPLY) {
            let reply = match action {
                "accept" => {
                    let text = response
                        .get("content")
                        .and_then(|c| c.get("reply"))
                        .and_then(Value::as_str)
                        .ok_or_else(|| {
                            refused("an accepted reply needs content {\"reply\": \"JSON text\"}")
                        })?;
                    Ok(json::parse(text.as_bytes()).map_err(|e| {
                        refused(&format!(
                            "the reply is not JSON ({e}); quote a string, as in \"\\\"done\\\"\""
                        ))
                    })?)
                }
                "decline" => Err("the reply was declined".to_owned()),
                "cancel" => Err("the reply was cancelled".to_owned()),
                _ => return Err(refused("the action must be accept, decline or cancel")),
            };
            replies.push((call_id.to_owned(), reply));
        } else {
            return Err(refused("not a question this server asked"));
        }
    }
    replies.extend(
        inputs
            .into_iter()
            .map(|(call_id, answers)| (call_id, Ok(Value::Object(answers)))),
    );
    Ok(replies)
}

/// What a client that can be asked nothing gets: the pause, and why it stays one.
pub(crate) fn unanswerable(pause: &Pause) -> String {
    let calls: Vec<String> = pause
        .pending
        .iter()
        .map(|call| {
            let kind = if call.approval {
                "an approval of"
            } else if call.questions.is_some() {
                "answers to the questions of"
            } else {
                "the reply of"
            };
            format!("{kind} tool \"{}\" (call {})", call.tool, call.call_id)
        })
        .collect();
    format!(
        "the run paused for {}, but this client can be asked neither in an input-required result (MCP 2026-07-28) nor on a session (elicitation); the run stays paused as {} until it expires",
        calls.join(", "),
        pause.run_id
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pause() -> Pause {
        let call = |id: &str, name: &str, arguments: Value, approval: bool| {
            codemode_runtime::code::PendingCall {
                call_id: id.to_owned(),
                global: "tools".to_owned(),
                name: name.to_owned(),
                arguments,
                approval,
                questions: None,
            }
        };
        paused(&PausedRun {
            run_id: "r".to_owned(),
            pending: vec![
                call("1", "echo", json!({"x": 1}), true),
                call("2", "lookup", json!({"q": "a"}), false),
            ],
        })
    }

    #[test]
    fn each_pending_call_is_one_question_and_each_answer_one_reply() {
        let asked = questions(&pause());
        assert_eq!(asked.keys().collect::<Vec<_>>(), ["approval:1", "reply:2"]);
        assert_eq!(
            asked["approval:1"]["message"],
            "Allow tool \"echo\" with {\"x\":1}?"
        );
        assert_eq!(
            asked["reply:2"]["requestedSchema"]["required"],
            json!(["reply"])
        );
        let result = input_required(&asked, "state".into()).unwrap();
        let wire = serde_json::to_value(&result).unwrap();
        assert_eq!(wire["resultType"], "input_required");
        assert_eq!(wire["requestState"], "state");
        assert_eq!(
            wire["inputRequests"]["reply:2"]["method"],
            "elicitation/create"
        );

        let answers = |pairs: Value| -> InputResponses { serde_json::from_value(pairs).unwrap() };
        let got = replies(&answers(json!({
            "approval:1": {"action": "decline"},
            "reply:2": {"action": "accept", "content": {"reply": "{\"n\": [1, \"two\", null]}"}},
        })))
        .unwrap();
        assert_eq!(got[0], ("1".to_owned(), Ok(json!(false))));
        assert_eq!(got[1], ("2".to_owned(), Ok(json!({"n": [1, "two", null]}))));
        let got = replies(&answers(
            json!({"approval:1": {"action": "accept"}, "reply:2": {"action": "cancel"}}),
        ))
        .unwrap();
        assert_eq!(got[0].1, Ok(json!(true)));
        assert_eq!(got[1].1, Err("the reply was cancelled".to_owned()));
        // The approval's form offers a scope; a scoped answer becomes the scoped reply.
        assert_eq!(
            asked["approval:1"]["requestedSchema"]["properties"]["scope"]["enum"],
            json!(["call", "run", "session"])
        );
        for (answer, reply) in [
            (
                json!({"action": "accept", "content": {"scope": "run"}}),
                json!({"approved": true, "scope": "run"}),
            ),
            (
                json!({"action": "decline", "content": {"scope": "session"}}),
                json!({"approved": false, "scope": "session"}),
            ),
            (
                json!({"action": "accept", "content": {"scope": "call"}}),
                json!(true),
            ),
        ] {
            let got = replies(&answers(json!({ "approval:1": answer }))).unwrap();
            assert_eq!(got[0].1, Ok(reply));
        }
        let refused = replies(&answers(
            json!({"approval:1": {"action": "accept", "content": {"scope": "always"}}}),
        ))
        .unwrap_err();
        assert!(
            refused.message.contains("unknown approval scope"),
            "{}",
            refused.message
        );

        for (bad, why) in [
            (
                json!({"reply:2": {"action": "accept", "content": {"reply": "yes"}}}),
                "not JSON",
            ),
            (json!({"reply:2": {"action": "accept"}}), "needs content"),
            (
                json!({"approval:1": {"action": "maybe"}}),
                "accept, decline or cancel",
            ),
            (json!({"other": {"action": "accept"}}), "not a question"),
            (json!({"approval:1": "yes"}), "an elicitation result"),
        ] {
            let refused = replies(&answers(bad)).unwrap_err();
            assert!(refused.message.contains(why), "{}", refused.message);
        }
        assert!(unanswerable(&pause()).contains("an approval of tool \"echo\" (call 1)"));
    }

    #[test]
    fn a_call_that_needs_input_asks_its_own_questions_and_gets_their_answers_as_one_reply() {
        let asking = paused(&PausedRun {
            run_id: "r".to_owned(),
            pending: vec![codemode_runtime::code::PendingCall {
                call_id: "3".to_owned(),
                global: "tools".to_owned(),
                name: "ship".to_owned(),
                arguments: json!({"crate": "serde"}),
                approval: false,
                questions: Some(
                    [
                        ("confirm".to_owned(), json!({"mode": "form", "message": "Ship?", "requestedSchema": {"type": "object"}})),
                        ("why:not".to_owned(), json!({"mode": "form", "message": "Why?", "requestedSchema": {"type": "object"}})),
                    ]
                    .into_iter()
                    .collect(),
                ),
            }],
        });
        let asked = questions(&asking);
        assert_eq!(
            asked.keys().collect::<Vec<_>>(),
            ["input:3:confirm", "input:3:why:not"]
        );
        assert_eq!(
            asked["input:3:confirm"]["message"],
            "Tool \"ship\" asks: Ship?"
        );
        let answers: InputResponses = serde_json::from_value(json!({
            "input:3:confirm": {"action": "accept", "content": {"ok": true}},
            "input:3:why:not": {"action": "decline"},
        }))
        .unwrap();
        assert_eq!(
            replies(&answers).unwrap(),
            [(
                "3".to_owned(),
                Ok(json!({
                    "confirm": {"action": "accept", "content": {"ok": true}},
                    "why:not": {"action": "decline"},
                }))
            )]
        );
        let odd: InputResponses =
            serde_json::from_value(json!({"input:3:confirm": {"action": "maybe"}})).unwrap();
        assert!(replies(&odd).is_err());
        assert!(
            unanswerable(&asking).contains("answers to the questions of tool \"ship\" (call 3)")
        );
    }
}
