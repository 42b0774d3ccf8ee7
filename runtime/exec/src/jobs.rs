//! The jobs runtime: background processes published under an owner (the agent scope that
//! started them), read incrementally by offset, and ended only by `job_kill`, their owner's
//! disposal or the runtime's teardown; never by the cancellation of the call that started
//! them.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::stream::{Slice, Stream};
use crate::subprocess::{Exit, Process};
use crate::supervisor::{lock, remove_where, stop_all, supervise, StopWith, Supervised};

/// Limits of the jobs runtime.
#[derive(Clone, Debug)]
pub struct JobLimits {
    /// Output retained per job (unread output is never dropped: the job waits instead).
    pub retained_bytes: usize,
    /// Jobs one owner may have running at once.
    pub running_per_owner: usize,
    /// Jobs running at once across every owner.
    pub running_total: usize,
    /// Finished jobs kept for reading, per owner; the oldest go first.
    pub finished_per_owner: usize,
    /// SIGTERM to SIGKILL.
    pub grace: Duration,
    /// Longest `waitMs`.
    pub max_wait: Duration,
}

impl Default for JobLimits {
    fn default() -> Self {
        Self {
            retained_bytes: 1024 * 1024,
            running_per_owner: 16,
            running_total: 64,
            finished_per_owner: 32,
            grace: Duration::from_secs(2),
            max_wait: Duration::from_secs(60),
        }
    }
}

/// Who owns a job: the agent scope's id (0 for calls made outside any agent).
pub type Owner = u64;

pub struct Jobs {
    limits: JobLimits,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    next: u64,
    jobs: BTreeMap<String, Arc<Job>>,
}

struct Job {
    id: String,
    owner: Owner,
    command: String,
    stream: Arc<Stream>,
    process: Supervised,
    sequence: u64,
}

impl Job {
    fn exit(&self) -> Option<Exit> {
        self.process.exit()
    }
}

/// One job as `job_list` shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct JobInfo {
    pub id: String,
    pub command: String,
    pub exit: Option<Exit>,
}

/// What `job_output` returns.
#[derive(Debug)]
pub struct JobOutput {
    pub slice: Slice,
    pub exit: Option<Exit>,
    /// The process has ended and all its output has been read: nothing more will come.
    pub finished: bool,
}

impl Jobs {
    pub fn new(limits: JobLimits) -> Arc<Self> {
        Arc::new(Self {
            limits,
            state: Mutex::new(State::default()),
        })
    }

    /// Why `owner` may not start another job now, if it may not: checked before a job's
    /// process is spawned, so that a refused command never runs, and again when it is
    /// published (another job may have started in between).
    pub(crate) fn refusal(&self, owner: Owner) -> Option<String> {
        self.refusal_in(&lock(&self.state), owner)
    }

    fn refusal_in(&self, state: &State, owner: Owner) -> Option<String> {
        let running = state.jobs.values().filter(|j| j.exit().is_none());
        let (mine, all) = running.fold((0, 0), |(mine, all), j| {
            (mine + usize::from(j.owner == owner), all + 1)
        });
        if all >= self.limits.running_total {
            Some(format!(
                "{all} background jobs are running across all sessions, the most this server allows; kill one (job_kill) or try again later"
            ))
        } else if mine >= self.limits.running_per_owner {
            Some(format!(
                "{} background jobs are already running; read or kill one (job_list, job_kill) before starting another",
                self.limits.running_per_owner
            ))
        } else {
            None
        }
    }

    /// Publishes a started process as a job of `owner`. When the owner already has as many
    /// jobs running as allowed, the process is terminated and the publication refused.
    pub(crate) async fn publish(
        self: &Arc<Self>,
        owner: Owner,
        command: &str,
        mut process: Process,
        output: tokio::net::unix::pipe::Receiver,
    ) -> Result<String, String> {
        let allocated = {
            let mut state = lock(&self.state);
            match self.refusal_in(&state, owner) {
                Some(refusal) => Err(refusal),
                None => {
                    state.next += 1;
                    Ok((format!("job-{}", state.next), state.next))
                }
            }
        };
        let (id, sequence) = match allocated {
            Ok(allocated) => allocated,
            Err(refusal) => {
                process.terminate(self.limits.grace).await;
                return Err(refusal);
            }
        };

        let stream = Arc::new(Stream::new(self.limits.retained_bytes));
        let pump = {
            let stream = stream.clone();
            tokio::spawn(async move { stream.pump(output).await })
        };
        let job = Arc::new(Job {
            id: id.clone(),
            owner,
            command: command.to_owned(),
            stream: stream.clone(),
            // Published: from here on only `kill`, the owner's disposal or teardown end it.
            process: supervise(
                process,
                stream.clone(),
                pump,
                StopWith::Terminate,
                self.limits.grace,
                Duration::from_secs(1),
            ),
            sequence,
        });
        let mut state = lock(&self.state);
        state.jobs.insert(id.clone(), job);
        prune(&mut state, owner, self.limits.finished_per_owner);
        Ok(id)
    }

    fn find(&self, owner: Owner, id: &str) -> Result<Arc<Job>, String> {
        lock(&self.state)
            .jobs
            .get(id)
            .filter(|job| job.owner == owner)
            .cloned()
            .ok_or_else(|| format!("unknown job {id:?}; job_list shows this agent's jobs"))
    }

    /// Output from `offset` (the reader's own position when `None`), waiting up to `wait` for
    /// some when there is none yet and the job is running.
    pub(crate) async fn output(
        &self,
        owner: Owner,
        id: &str,
        offset: Option<u64>,
        wait: Duration,
        signal: &codemode_runtime::signal::AbortSignal,
    ) -> Result<JobOutput, String> {
        let job = self.find(owner, id)?;
        let wait = wait.min(self.limits.max_wait);
        // The stream closes once the process has ended and its output is in.
        job.stream.wait_ready(offset, wait, signal).await;
        let exit = job.exit();
        let slice = job.stream.read(offset);
        let finished = exit.is_some() && job.stream.ended_at(slice.next);
        Ok(JobOutput {
            slice,
            exit,
            finished,
        })
    }

    /// The owner's jobs, oldest first.
    pub fn list(&self, owner: Owner) -> Vec<JobInfo> {
        let state = lock(&self.state);
        let mut jobs: Vec<&Arc<Job>> = state.jobs.values().filter(|j| j.owner == owner).collect();
        jobs.sort_by_key(|j| j.sequence);
        jobs.into_iter()
            .map(|j| JobInfo {
                id: j.id.clone(),
                command: j.command.clone(),
                exit: j.exit(),
            })
            .collect()
    }

    /// Terminates a running job (terminate then wait). `Ok(false)` when it had already ended.
    pub(crate) async fn kill(&self, owner: Owner, id: &str) -> Result<bool, String> {
        let job = self.find(owner, id)?;
        Ok(job.process.stop().await)
    }

    /// Terminates every job of `owner` and forgets them: the owner is gone.
    pub async fn dispose_owner(&self, owner: Owner) {
        let jobs = remove_where(&mut lock(&self.state).jobs, |j| j.owner == owner);
        stop_all(&jobs, |j| &j.process).await;
    }

    /// Terminates every job: the runtime is going away.
    pub async fn shutdown(&self) {
        let jobs = remove_where(&mut lock(&self.state).jobs, |_| true);
        stop_all(&jobs, |j| &j.process).await;
    }
}

/// Drops `owner`'s oldest finished jobs beyond `keep`.
fn prune(state: &mut State, owner: Owner, keep: usize) {
    let mut finished: Vec<(u64, String)> = state
        .jobs
        .values()
        .filter(|j| j.owner == owner && j.exit().is_some())
        .map(|j| (j.sequence, j.id.clone()))
        .collect();
    if finished.len() <= keep {
        return;
    }
    finished.sort();
    for (_, id) in finished.iter().take(finished.len() - keep) {
        state.jobs.remove(id);
    }
}
