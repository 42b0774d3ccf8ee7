//! The repeat-tool reminder: counts, per agent, consecutive calls of the same tool with the
//! same canonical (deep key-sorted) arguments, and at configured run lengths attaches an
//! advisory reminder as an additional context. It never vetoes or rewrites a call.
//!
//! Counting happens in post-execute, so denied calls count too; calls without an agent are
//! ignored; calls excluded by `include`/`exclude` are transparent (they neither count nor
//! reset). A user message resets that agent's chain ([`RepeatReminder::user_message`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use crate::json::to_string_sorted;
use crate::tools::content::{ContentBlock, ContextMessage, ContextSource};
use crate::tools::pipeline::ToolCall;
use crate::tools::registry::{RegistrationGuard, Registry};
use crate::tools::scope::{AgentScope, ScopeNode};

/// The plugin's name, used as the source of its reminders and in configuration errors.
pub const PLUGIN_NAME: &str = "repeat-tool-reminder";

/// The first-threshold reminder.
pub const GENTLE_REMINDER: &str = "You are repeating the exact same tool call with identical arguments. Carefully analyze the previous result before calling again: if the task is not complete, try a different approach or different arguments instead of repeating the call.";

/// The reminder for every later threshold.
pub fn detailed_reminder(tool: &str, count: u64, arguments_preview: &str) -> String {
    format!(
        "Repeated tool call detected:\n- tool: {tool}\n- consecutive_calls: {count}\n- arguments: {arguments_preview}\nThe repeated calls are not making progress. Do not call this tool with these exact arguments again. Inspect the latest result and choose a different action, different arguments, or finish the task if enough evidence has been gathered."
    )
}

/// Configuration, checked at load ([`RepeatReminder::new`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RepeatReminderConfig {
    /// Run lengths that fire a reminder; integers ≥ 2, non-empty, no duplicates.
    pub thresholds: Vec<i64>,
    /// `*`-wildcard name patterns to track; empty tracks every tool.
    pub include: Vec<String>,
    /// `*`-wildcard name patterns that are transparent to the chain.
    pub exclude: Vec<String>,
    /// Cap of the arguments quoted in the detailed reminder (≥ 1).
    pub arguments_preview_chars: i64,
}

impl Default for RepeatReminderConfig {
    fn default() -> Self {
        Self {
            thresholds: vec![3, 5, 8],
            include: Vec::new(),
            exclude: Vec::new(),
            arguments_preview_chars: 500,
        }
    }
}

/// A configuration the plugin refuses to load.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(String);

struct Chain {
    agent: Weak<ScopeNode>,
    name: String,
    canonical: String,
    count: u64,
}

struct Inner {
    thresholds: Vec<u64>,
    include: Vec<String>,
    exclude: Vec<String>,
    preview_chars: usize,
    chains: Mutex<HashMap<u64, Chain>>,
}

/// The plugin; clone it to keep a handle for [`RepeatReminder::user_message`].
#[derive(Clone)]
pub struct RepeatReminder {
    inner: Arc<Inner>,
}

fn validate_thresholds(values: &[i64]) -> Result<Vec<u64>, ConfigError> {
    if values.is_empty() {
        return Err(ConfigError(format!(
            "{PLUGIN_NAME}: `thresholds` must not be empty"
        )));
    }
    let mut sorted = Vec::with_capacity(values.len());
    for &value in values {
        match u64::try_from(value) {
            Ok(v) if v >= 2 => sorted.push(v),
            _ => {
                return Err(ConfigError(format!(
                    "{PLUGIN_NAME}: invalid threshold {value} — every threshold must be an integer >= 2"
                )))
            }
        }
    }
    sorted.sort_unstable();
    if sorted.windows(2).any(|w| w[0] == w[1]) {
        return Err(ConfigError(format!(
            "{PLUGIN_NAME}: `thresholds` must not contain duplicates"
        )));
    }
    Ok(sorted)
}

/// Anchored `*` wildcard match; every other character is literal. Greedy with one backtrack
/// point, so it runs in O(pattern × name) without recursion.
fn wildcard_matches(pattern: &str, name: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let n: Vec<char> = name.chars().collect();
    let (mut pi, mut ni) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ni));
            pi += 1;
        } else if pi < p.len() && p[pi] == n[ni] {
            pi += 1;
            ni += 1;
        } else if let Some((star_p, star_n)) = star {
            pi = star_p + 1;
            ni = star_n + 1;
            star = Some((star_p, star_n + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

/// `text` cut to `cap` UTF-16 units with an omission marker, as the reference counts length.
fn preview(text: &str, cap: usize) -> String {
    let total = text.encode_utf16().count();
    if total <= cap {
        return text.to_owned();
    }
    let mut units = 0;
    let mut cut = 0;
    for (index, c) in text.char_indices() {
        if units + c.len_utf16() > cap {
            break;
        }
        units += c.len_utf16();
        cut = index + c.len_utf8();
    }
    format!("{}… (+{} more chars)", &text[..cut], total - units)
}

impl RepeatReminder {
    /// Checks `config` and builds the plugin; an invalid threshold list or preview cap is
    /// refused.
    pub fn new(config: RepeatReminderConfig) -> Result<Self, ConfigError> {
        let thresholds = validate_thresholds(&config.thresholds)?;
        let preview_chars = match usize::try_from(config.arguments_preview_chars) {
            Ok(n) if n >= 1 => n,
            _ => {
                return Err(ConfigError(format!(
                    "{PLUGIN_NAME}: invalid argumentsPreviewChars {} — must be an integer >= 1",
                    config.arguments_preview_chars
                )))
            }
        };
        Ok(Self {
            inner: Arc::new(Inner {
                thresholds,
                include: config.include,
                exclude: config.exclude,
                preview_chars,
                chains: Mutex::new(HashMap::new()),
            }),
        })
    }

    /// Hooks the reminder into `registry`'s post-execute waterfall. It counts first, delegates,
    /// then prepends its reminder to whatever decision came back (accept or block).
    pub fn install(&self, registry: &Registry) -> RegistrationGuard {
        let inner = self.inner.clone();
        registry.on_post_execute(move |call, _result, next| {
            let reminder = inner.observe(&call);
            async move {
                let mut downstream = next.run().await?;
                if let Some(reminder) = reminder {
                    downstream.additional_contexts_mut().insert(0, reminder);
                }
                Ok(downstream)
            }
        })
    }

    /// A user message reached `agent`: repetition across it is not a loop.
    pub fn user_message(&self, agent: &AgentScope) {
        self.inner.lock().remove(&agent.id());
    }
}

impl Inner {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Chain>> {
        // Insert/remove only: a poisoned map is still consistent.
        self.chains
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn tracked(&self, name: &str) -> bool {
        if !self.include.is_empty() && !self.include.iter().any(|p| wildcard_matches(p, name)) {
            return false;
        }
        !self.exclude.iter().any(|p| wildcard_matches(p, name))
    }

    fn observe(&self, call: &ToolCall) -> Option<ContextMessage> {
        let agent = call.agent()?;
        if !self.tracked(call.name()) {
            return None;
        }
        let canonical = to_string_sorted(call.arguments());
        let mut chains = self.lock();
        // Chains of agents that no longer exist are dropped, as a weak map would.
        chains.retain(|_, chain| chain.agent.strong_count() > 0);
        let count = match chains.get(&agent.id()) {
            Some(chain) if chain.name == call.name() && chain.canonical == canonical => {
                chain.count + 1
            }
            _ => 1,
        };
        let text = if !self.thresholds.contains(&count) {
            None
        } else if Some(&count) == self.thresholds.first() {
            Some(GENTLE_REMINDER.to_owned())
        } else {
            Some(detailed_reminder(
                call.name(),
                count,
                &preview(&canonical, self.preview_chars),
            ))
        };
        chains.insert(
            agent.id(),
            Chain {
                agent: agent.downgrade(),
                name: call.name().to_owned(),
                canonical,
                count,
            },
        );
        drop(chains);
        let text = text?;
        Some(ContextMessage {
            content: vec![ContentBlock::text(text)],
            source: ContextSource {
                kind: "plugin".into(),
                plugin: Some(PLUGIN_NAME.into()),
                form: Some("notice".into()),
                summary: Some(format!("{} × {count}", call.name())),
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcards_are_anchored_and_literal_otherwise() {
        assert!(wildcard_matches("read_*", "read_file"));
        assert!(!wildcard_matches("read_*", "xread_file"));
        assert!(wildcard_matches("a.b", "a.b"));
        assert!(!wildcard_matches("a.b", "axb"));
        assert!(wildcard_matches("*", ""));
        assert!(wildcard_matches("*x*y", "axxby"));
        assert!(!wildcard_matches("*x*y", "axxbz"));
    }

    #[test]
    fn preview_marks_the_omitted_length() {
        assert_eq!(preview("abcdef", 4), "abcd… (+2 more chars)");
        assert_eq!(preview("abc", 4), "abc");
    }
}
