//! Approval answers that reach past their call. An answer scoped to the run decides the rest
//! of that run's calls of the tool (a run: the agent's call and every call its program makes,
//! which share a root call id); one scoped to the session decides the agent's later calls of
//! it. A channel is asked one question at a time per agent, so the calls a loop makes at once
//! wait for the first answer instead of each asking the person.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;

use super::hooks::{ApprovalHook, ApprovalOutcome, ApprovalRequest, ApprovalScope};
use crate::run_code::root_call_id;

/// Most runs and sessions whose scoped answers are kept; the oldest are forgotten first (a
/// forgotten answer only means asking again).
const KEPT: usize = 4096;

/// The hook a registry mounts: the channel, behind the memory of scoped answers.
pub(crate) struct Remembering {
    channel: Arc<dyn ApprovalHook>,
    memory: Answers,
}

/// A registry's scoped answers, shared by its approval hook and what answers besides it.
#[derive(Clone, Default)]
pub(crate) struct Answers(Arc<Mutex<Memory>>);

impl Answers {
    pub(crate) fn keep_for_session(&self, agent: u64, tool: &str, allowed: bool) {
        if let Ok(mut memory) = self.0.lock() {
            memory.sessions.set(agent, tool, allowed);
        }
    }

    pub(crate) fn for_session(&self, agent: u64, tool: &str) -> Option<bool> {
        self.0.lock().ok()?.sessions.get(&agent, tool)
    }
}

#[derive(Default)]
struct Memory {
    /// `(agent, root call id)` → tool → allowed.
    runs: Bounded<(u64, String)>,
    /// agent → tool → allowed.
    sessions: Bounded<u64>,
    /// One question at a time per agent.
    asking: BTreeMap<u64, Arc<tokio::sync::Mutex<()>>>,
}

struct Bounded<K> {
    answers: BTreeMap<K, BTreeMap<String, bool>>,
    order: VecDeque<K>,
}

impl<K> Default for Bounded<K> {
    fn default() -> Self {
        Self {
            answers: BTreeMap::new(),
            order: VecDeque::new(),
        }
    }
}

impl<K: Ord + Clone> Bounded<K> {
    fn get(&self, key: &K, tool: &str) -> Option<bool> {
        self.answers.get(key)?.get(tool).copied()
    }

    fn set(&mut self, key: K, tool: &str, allowed: bool) {
        if !self.answers.contains_key(&key) {
            if self.order.len() >= KEPT {
                if let Some(oldest) = self.order.pop_front() {
                    self.answers.remove(&oldest);
                }
            }
            self.order.push_back(key.clone());
        }
        self.answers
            .entry(key)
            .or_default()
            .insert(tool.to_owned(), allowed);
    }
}

impl Remembering {
    pub(crate) fn new(channel: Arc<dyn ApprovalHook>, memory: Answers) -> Self {
        Self { channel, memory }
    }
}

impl Memory {
    fn recall(&self, agent: u64, run: &str, tool: &str) -> Option<ApprovalOutcome> {
        let scoped = |allowed: bool, scope| {
            if allowed {
                ApprovalOutcome::AllowedFor(scope)
            } else {
                ApprovalOutcome::RejectedFor(scope)
            }
        };
        if let Some(allowed) = self.runs.get(&(agent, run.to_owned()), tool) {
            return Some(scoped(allowed, ApprovalScope::Run));
        }
        self.sessions
            .get(&agent, tool)
            .map(|allowed| scoped(allowed, ApprovalScope::Session))
    }

    fn keep(&mut self, agent: u64, run: &str, tool: &str, outcome: ApprovalOutcome) {
        let (allowed, scope) = match outcome {
            ApprovalOutcome::AllowedFor(scope) => (true, scope),
            ApprovalOutcome::RejectedFor(scope) => (false, scope),
            _ => return,
        };
        match scope {
            ApprovalScope::Run => self.runs.set((agent, run.to_owned()), tool, allowed),
            ApprovalScope::Session => self.sessions.set(agent, tool, allowed),
        }
    }
}

impl ApprovalHook for Remembering {
    fn request(&self, request: ApprovalRequest) -> BoxFuture<'static, ApprovalOutcome> {
        let channel = self.channel.clone();
        let memory = self.memory.0.clone();
        Box::pin(async move {
            let agent = request.agent.id();
            let run = root_call_id(&request.call_id).to_owned();
            let tool = request.tool_name.clone();
            let turn = {
                let Ok(mut memory) = memory.lock() else {
                    return ApprovalOutcome::Unavailable;
                };
                if memory.asking.len() >= KEPT && !memory.asking.contains_key(&agent) {
                    memory.asking.retain(|_, turn| Arc::strong_count(turn) > 1);
                }
                memory.asking.entry(agent).or_default().clone()
            };
            let signal = request.signal.clone();
            let _turn = tokio::select! {
                turn = turn.lock_owned() => turn,
                _ = signal.aborted() => return ApprovalOutcome::Cancelled,
            };
            // Asked after the turn came: an answer given meanwhile may already decide it.
            let recalled = match memory.lock() {
                Ok(memory) => memory.recall(agent, &run, &tool),
                Err(_) => return ApprovalOutcome::Unavailable,
            };
            if let Some(outcome) = recalled {
                return outcome;
            }
            let outcome = channel.request(request).await;
            if let Ok(mut memory) = memory.lock() {
                memory.keep(agent, &run, &tool, outcome);
            }
            outcome
        })
    }
}
