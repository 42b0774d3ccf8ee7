//! The repeat-tool reminder (ported from the reference's repeat-tool-reminder suite).

mod tools_support;

use std::sync::Arc;

use codemode_runtime::tools::plugins::repeat_reminder::{
    detailed_reminder, RepeatReminder, RepeatReminderConfig, GENTLE_REMINDER,
};
use codemode_runtime::tools::*;
use serde_json::{json, Value};
use tools_support::{echo, input};

struct Fixture {
    registry: Registry,
    reminder: RepeatReminder,
    agent: AgentScope,
}

fn fixture(config: RepeatReminderConfig) -> Fixture {
    let registry = Registry::new();
    for name in ["grep", "todo_write", "read_file", "write"] {
        registry.register(echo(name), None).unwrap().keep();
    }
    let reminder = RepeatReminder::new(config).expect("valid config");
    reminder.install(&registry).keep();
    Fixture {
        registry,
        reminder,
        agent: AgentScope::root(),
    }
}

impl Fixture {
    async fn call(&self, name: &str, args: Value) -> Arc<ToolExecutionResult> {
        self.registry
            .execute(input(name, args).agent(&self.agent))
            .await
    }

    /// The reminder texts attached to one call.
    async fn reminders(&self, name: &str, args: Value) -> Vec<String> {
        reminder_texts(&*self.call(name, args).await)
    }
}

fn reminder_texts(result: &ToolExecutionResult) -> Vec<String> {
    result
        .additional_contexts
        .iter()
        .filter(|c| c.source.plugin.as_deref() == Some("repeat-tool-reminder"))
        .map(|c| match &c.content[0] {
            ContentBlock::Text { text } => text.clone(),
            other => other.kind().to_owned(),
        })
        .collect()
}

#[tokio::test]
async fn escalates_at_three_and_five_and_stays_silent_in_between() {
    let f = fixture(RepeatReminderConfig::default());
    let mut fired = Vec::new();
    for n in 1..=9 {
        let texts = f.reminders("grep", json!({"q": "x"})).await;
        fired.push((n, texts.len()));
        if n == 3 {
            assert_eq!(texts, [GENTLE_REMINDER]);
        }
        if n == 5 {
            assert_eq!(texts, [detailed_reminder("grep", 5, "{\"q\":\"x\"}")]);
            assert!(texts[0].starts_with("Repeated tool call detected:\n- tool: grep\n- consecutive_calls: 5\n- arguments: {\"q\":\"x\"}\n"));
        }
    }
    let firing: Vec<u32> = fired
        .iter()
        .filter(|(_, n)| *n > 0)
        .map(|(i, _)| *i)
        .collect();
    assert_eq!(firing, [3, 5, 8]);
}

#[tokio::test]
async fn the_message_carries_its_source_and_summary() {
    let f = fixture(RepeatReminderConfig::default());
    for _ in 0..2 {
        f.call("grep", json!({})).await;
    }
    let result = f.call("grep", json!({})).await;
    let context = &result.additional_contexts[0];
    assert_eq!(
        serde_json::to_value(&context.source).unwrap(),
        json!({"kind": "plugin", "plugin": "repeat-tool-reminder", "form": "notice", "summary": "grep × 3"})
    );
    assert_eq!(result.text(), "ok", "content is never replaced");
}

#[tokio::test]
async fn the_gentle_text_is_keyed_to_the_first_threshold() {
    let f = fixture(RepeatReminderConfig {
        thresholds: vec![4, 2],
        ..Default::default()
    });
    assert!(f.reminders("grep", json!({})).await.is_empty());
    assert_eq!(f.reminders("grep", json!({})).await, [GENTLE_REMINDER]);
    assert!(f.reminders("grep", json!({})).await.is_empty());
    assert!(f.reminders("grep", json!({})).await[0].contains("consecutive_calls: 4"));
}

#[tokio::test]
async fn caps_the_arguments_preview() {
    let f = fixture(RepeatReminderConfig {
        thresholds: vec![2, 3],
        arguments_preview_chars: 5,
        ..Default::default()
    });
    for _ in 0..2 {
        f.call("grep", json!({"q": "abcdefgh"})).await;
    }
    let texts = f.reminders("grep", json!({"q": "abcdefgh"})).await;
    assert!(
        texts[0].contains("- arguments: {\"q\":… (+11 more chars)\n"),
        "{texts:?}"
    );
}

#[tokio::test]
async fn different_arguments_or_tools_reset_the_chain() {
    let f = fixture(RepeatReminderConfig {
        thresholds: vec![2],
        ..Default::default()
    });
    f.call("grep", json!({"q": 1})).await;
    assert!(f.reminders("grep", json!({"q": 2})).await.is_empty());
    assert!(f.reminders("read_file", json!({"q": 2})).await.is_empty());
    assert_eq!(f.reminders("read_file", json!({"q": 2})).await.len(), 1);
}

#[tokio::test]
async fn excluded_tools_are_transparent() {
    let f = fixture(RepeatReminderConfig {
        thresholds: vec![2],
        exclude: vec!["todo_*".into()],
        ..Default::default()
    });
    f.call("grep", json!({"q": "x"})).await;
    assert!(f.reminders("todo_write", json!({})).await.is_empty());
    assert!(
        f.reminders("todo_write", json!({})).await.is_empty(),
        "excluded calls never count"
    );
    assert_eq!(
        f.reminders("grep", json!({"q": "x"})).await.len(),
        1,
        "and never reset"
    );
}

#[tokio::test]
async fn include_patterns_are_anchored_wildcards_with_literal_metacharacters() {
    let f = fixture(RepeatReminderConfig {
        thresholds: vec![2],
        include: vec!["read_*".into(), "w.ite".into()],
        ..Default::default()
    });
    f.call("read_file", json!({})).await;
    assert_eq!(f.reminders("read_file", json!({})).await.len(), 1);
    f.call("write", json!({})).await;
    assert!(
        f.reminders("write", json!({})).await.is_empty(),
        "`.` is literal"
    );
}

#[tokio::test]
async fn key_order_does_not_matter() {
    let f = fixture(RepeatReminderConfig {
        thresholds: vec![2],
        ..Default::default()
    });
    f.call("grep", json!({"a": 1, "b": {"y": 2, "x": 1}})).await;
    assert_eq!(
        f.reminders("grep", json!({"b": {"x": 1, "y": 2}, "a": 1}))
            .await
            .len(),
        1
    );
}

#[tokio::test]
async fn chains_are_per_agent_and_a_user_message_resets_one() {
    let f = fixture(RepeatReminderConfig {
        thresholds: vec![2],
        ..Default::default()
    });
    let other = AgentScope::root();
    f.call("grep", json!({})).await;
    let interleaved = f
        .registry
        .execute(input("grep", json!({})).agent(&other))
        .await;
    assert!(reminder_texts(&interleaved).is_empty());
    assert_eq!(f.reminders("grep", json!({})).await.len(), 1);
    f.reminder.user_message(&f.agent);
    assert!(f.reminders("grep", json!({})).await.is_empty());
}

#[tokio::test]
async fn calls_without_an_agent_are_ignored() {
    let f = fixture(RepeatReminderConfig {
        thresholds: vec![2],
        ..Default::default()
    });
    for _ in 0..3 {
        let result = f.registry.execute(input("grep", json!({}))).await;
        assert!(reminder_texts(&result).is_empty());
    }
}

#[tokio::test]
async fn denied_calls_count_and_the_reminder_folds_onto_a_block() {
    let f = fixture(RepeatReminderConfig {
        thresholds: vec![2],
        ..Default::default()
    });
    let deny = f.registry.guard(None, |_| Some("nope".into()));
    f.call("grep", json!({})).await;
    let denied = f.call("grep", json!({})).await;
    assert_eq!(denied.error().unwrap().message, "nope");
    assert_eq!(reminder_texts(&denied).len(), 1);
    drop(deny);
    f.registry
        .on_post_execute(|_, _, _| async {
            Ok(PostDecision::Block {
                feedback: vec![ContentBlock::text("blocked")],
                additional_contexts: vec![],
            })
        })
        .keep();
    let f2 = f;
    f2.reminder.user_message(&f2.agent);
    f2.call("grep", json!({})).await;
    let blocked = f2.call("grep", json!({})).await;
    assert_eq!(blocked.text(), "blocked");
    assert_eq!(reminder_texts(&blocked).len(), 1);
}

#[tokio::test]
async fn folds_onto_a_value_replacement_ahead_of_downstream_contexts() {
    let f = fixture(RepeatReminderConfig {
        thresholds: vec![2],
        ..Default::default()
    });
    f.registry
        .on_post_execute(|_, _, _| async {
            Ok(PostDecision::AcceptValue {
                value: json!("replaced"),
                additional_contexts: vec![ContextMessage {
                    content: vec![ContentBlock::text("downstream")],
                    source: ContextSource::plugin("other"),
                }],
            })
        })
        .keep();
    f.call("grep", json!({})).await;
    let result = f.call("grep", json!({})).await;
    assert_eq!(result.text(), "replaced");
    let plugins: Vec<_> = result
        .additional_contexts
        .iter()
        .map(|c| c.source.plugin.clone().unwrap())
        .collect();
    assert_eq!(plugins, ["repeat-tool-reminder", "other"]);
}

#[tokio::test]
async fn dropping_the_registration_stops_reminding() {
    let registry = Registry::new();
    registry.register(echo("grep"), None).unwrap().keep();
    let reminder = RepeatReminder::new(RepeatReminderConfig {
        thresholds: vec![2],
        ..Default::default()
    })
    .unwrap();
    let guard = reminder.install(&registry);
    let agent = AgentScope::root();
    registry
        .execute(input("grep", json!({})).agent(&agent))
        .await;
    drop(guard);
    let result = registry
        .execute(input("grep", json!({})).agent(&agent))
        .await;
    assert!(result.additional_contexts.is_empty());
}

#[test]
fn refuses_bad_configuration_at_load() {
    let error =
        |config: RepeatReminderConfig| RepeatReminder::new(config).err().unwrap().to_string();
    assert_eq!(
        error(RepeatReminderConfig {
            thresholds: vec![],
            ..Default::default()
        }),
        "repeat-tool-reminder: `thresholds` must not be empty"
    );
    assert_eq!(
        error(RepeatReminderConfig {
            thresholds: vec![3, 1],
            ..Default::default()
        }),
        "repeat-tool-reminder: invalid threshold 1 — every threshold must be an integer >= 2"
    );
    assert_eq!(
        error(RepeatReminderConfig {
            thresholds: vec![3, 3],
            ..Default::default()
        }),
        "repeat-tool-reminder: `thresholds` must not contain duplicates"
    );
    assert_eq!(
        error(RepeatReminderConfig {
            arguments_preview_chars: 0,
            ..Default::default()
        }),
        "repeat-tool-reminder: invalid argumentsPreviewChars 0 — must be an integer >= 1"
    );
}
