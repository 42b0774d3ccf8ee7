//! Questions an upstream server asks while a program's call of one of its tools runs
//! (`elicitation/create`): put to the person codemode asks for `--ask` (the terminal under
//! `codemode run`, the client of the session under `codemode mcp`), their answer sent back.
//! A question goes to the agent whose call is in flight on that server; with none, or with
//! calls of several agents in flight (the question does not say which call it is about), it is
//! declined, as it is where there is no one to ask.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use futures::future::BoxFuture;
use rmcp::model::{ElicitRequestParams, ElicitResult, ElicitationAction};

/// Puts an upstream server's question to a person.
pub trait Asker: Send + Sync + 'static {
    /// Asks the person behind `agent` the question `params` of server `server`.
    fn ask(
        &self,
        agent: u64,
        server: &str,
        params: ElicitRequestParams,
    ) -> BoxFuture<'static, ElicitResult>;

    /// Whether `agent`'s person is asked by pausing its run rather than during the call: the
    /// call then fails with its questions ([`codemode_runtime::tools::ToolError::needs_input`])
    /// and is made again with the answers when the run resumes.
    fn defers(&self, _agent: u64) -> bool {
        false
    }
}

/// Where the upstream servers' questions go; shared by every upstream of a session, and
/// answered by whoever [`Questions::answer_with`] names (until then, every question is
/// declined).
#[derive(Clone, Default)]
pub struct Questions {
    asker: Arc<OnceLock<Arc<dyn Asker>>>,
    /// The agents with calls in flight, by server (one entry per call).
    calling: Arc<Mutex<HashMap<String, Vec<u64>>>>,
}

/// A call in flight, noted until it is dropped.
pub(super) struct Calling {
    questions: Questions,
    server: String,
    agent: u64,
}

impl Drop for Calling {
    fn drop(&mut self) {
        let mut calling = self
            .questions
            .calling
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if let Some(agents) = calling.get_mut(&self.server) {
            if let Some(at) = agents.iter().position(|a| *a == self.agent) {
                agents.swap_remove(at);
            }
            if agents.is_empty() {
                calling.remove(&self.server);
            }
        }
    }
}

impl Questions {
    /// Sends questions to `asker` from now on (the first one given stays).
    pub fn answer_with(&self, asker: Arc<dyn Asker>) {
        let _ = self.asker.set(asker);
    }

    /// Notes that `agent` calls `server` until the guard drops.
    pub(super) fn calling(&self, server: &str, agent: u64) -> Calling {
        self.calling
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(server.to_owned())
            .or_default()
            .push(agent);
        Calling {
            questions: self.clone(),
            server: server.to_owned(),
            agent,
        }
    }

    /// Whether `agent`'s questions wait for its run to pause ([`Asker::defers`]).
    pub(super) fn defers(&self, agent: u64) -> bool {
        self.asker.get().is_some_and(|asker| asker.defers(agent))
    }

    /// The answer to `server`'s question.
    pub(super) async fn ask(&self, server: &str, params: ElicitRequestParams) -> ElicitResult {
        let agent = {
            let calling = self.calling.lock().unwrap_or_else(|p| p.into_inner());
            let agents = calling.get(server).map(Vec::as_slice).unwrap_or_default();
            match agents.first() {
                Some(first) if agents.iter().all(|a| a == first) => Some(*first),
                _ => None,
            }
        };
        match (self.asker.get(), agent) {
            (Some(asker), Some(agent)) => asker.ask(agent, server, params).await,
            _ => declined(),
        }
    }
}

/// The answer when no one can be asked.
pub fn declined() -> ElicitResult {
    ElicitResult::new(ElicitationAction::Decline)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_question_goes_to_the_one_agent_calling_and_is_declined_otherwise() {
        let questions = Questions::default();
        let only = |q: &Questions| {
            let calling = q.calling.lock().unwrap();
            calling.get("s").cloned().unwrap_or_default()
        };
        let a = questions.calling("s", 1);
        let b = questions.calling("s", 1);
        assert_eq!(only(&questions), [1, 1]);
        let c = questions.calling("s", 2);
        drop((a, b));
        assert_eq!(only(&questions), [2]);
        drop(c);
        assert!(questions.calling.lock().unwrap().is_empty());
    }
}
