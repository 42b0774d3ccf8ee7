//! The guest's job queue: promise reactions only, drained to empty on every turn.
//!
//! Timers are not Boa jobs here: `setTimeout` arms a host timer and the host calls back in
//! (`cm_deliver`), so a waiting program costs no guest execution at all. Async and
//! finalization-registry jobs need a native executor the sandbox does not have; they are dropped.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;

use boa_engine::job::{GenericJob, Job, JobExecutor, PromiseJob};
use boa_engine::{Context, JsResult};

#[derive(Default)]
pub struct Queue {
    promise_jobs: RefCell<VecDeque<PromiseJob>>,
    generic_jobs: RefCell<VecDeque<GenericJob>>,
}

impl JobExecutor for Queue {
    fn enqueue_job(self: Rc<Self>, job: Job, _context: &mut Context) {
        match job {
            Job::PromiseJob(job) => self.promise_jobs.borrow_mut().push_back(job),
            Job::GenericJob(job) => self.generic_jobs.borrow_mut().push_back(job),
            _ => {}
        }
    }

    fn run_jobs(self: Rc<Self>, context: &mut Context) -> JsResult<()> {
        loop {
            let next = self.promise_jobs.borrow_mut().pop_front();
            if let Some(job) = next {
                if let Err(error) = job.call(context) {
                    self.clear();
                    return Err(error);
                }
                continue;
            }
            let next = self.generic_jobs.borrow_mut().pop_front();
            match next {
                Some(job) => {
                    if let Err(error) = job.call(context) {
                        self.clear();
                        return Err(error);
                    }
                }
                None => break,
            }
        }
        context.clear_kept_objects();
        Ok(())
    }
}

impl Queue {
    fn clear(&self) {
        self.promise_jobs.borrow_mut().clear();
        self.generic_jobs.borrow_mut().clear();
    }
}
