//! `codemode mcp`: serve `run_code` over stdio (the default) or streamable HTTP at `/mcp`
//! ([`super::http`]).

use std::sync::Arc;

use codemode_mcp::server::{
    permitted_tools, ElicitApproval, Presentation, Served, ServedPausing, ServedTasks,
};
use codemode_runtime::run_code::Flavor;
use codemode_runtime::tools::ToolMode;
use rmcp::ServiceExt;

use super::http::HttpSetup;
use super::metrics::Metrics;
use super::session::{Pausing, ToolSession};
use super::{McpArgs, ServeMode, EXIT_OK, EXIT_PROGRAM_FAILED, EXIT_USAGE};

pub async fn serve(mut args: McpArgs, metrics: Option<Metrics>) -> u8 {
    let mode = match args.mode {
        ServeMode::Code => ToolMode::Code,
        ServeMode::Both => ToolMode::Both,
    };
    // The HTTP side is checked (and its address bound) before anything starts.
    let http = match &args.http {
        None => None,
        Some(addr) => match HttpSetup::new(&args, addr).await {
            Ok(setup) => Some(setup),
            Err(message) => {
                eprintln!("{message}");
                return EXIT_USAGE;
            }
        },
    };
    if args.stateless && args.tools.exec.is_some() {
        eprintln!("codemode: --stateless cannot serve --exec: its background jobs and terminals live in the memory of one process, which the next request may not reach; serve --exec without --stateless (a client then keeps to one replica through its Mcp-Session-Id)");
        return EXIT_USAGE;
    }
    if args.pause.pause_on_ask && args.tools.ask.is_empty() {
        eprintln!("{}", super::session::PAUSE_ON_ASK_WITHOUT_ASK);
        return EXIT_USAGE;
    }
    // A stateless server cannot ask on a session: its approvals pause, like --pause-on-ask.
    let approvals_pause = !args.tools.ask.is_empty() && (args.pause.pause_on_ask || args.stateless);
    // A store named outright also keeps runs paused for upstream servers' questions, which a
    // client of 2026-07-28 is asked in an input-required result.
    let pauses = !args.pause.pause_on.is_empty() || approvals_pause || args.pause.state.is_some();
    let pausing = if !pauses && args.task_after_ms.is_none() {
        None
    } else {
        match Pausing::open(&args.pause, &[]) {
            Ok(mut pausing) => {
                if approvals_pause {
                    pausing.approve_on = args.tools.ask.clone();
                }
                pausing.durability = pausing
                    .durability
                    .clone()
                    .client_quota(Some(args.state_quota_per_client_mb << 20));
                Some(pausing)
            }
            Err(message) => {
                eprintln!("{message}");
                return EXIT_USAGE;
            }
        }
    };
    let served_pausing = pausing.as_ref().map(|p| ServedPausing {
        durability: p.durability.clone(),
        approvals: approvals_pause,
    });
    let served_tasks = pausing
        .as_ref()
        .zip(args.task_after_ms)
        .map(|(p, ms)| ServedTasks {
            durability: p.durability.clone(),
            after: std::time::Duration::from_millis(ms),
            lease: std::time::Duration::from_millis(args.task_lease_ms),
        });
    // Server-wide limits of the execution tools, across every session.
    let mut exec = codemode_exec::ExecConfig::default();
    let count = |n: u64| usize::try_from(n).unwrap_or(usize::MAX);
    if let Some(n) = args.max_jobs {
        exec.jobs.running_total = count(n);
    }
    if let Some(n) = args.max_terminals {
        exec.terminals.total = count(n);
    }
    if let Some(n) = args.max_processes {
        exec.max_processes = count(n);
    }
    args.tools.exec_config = Some(exec);
    let mut session = match ToolSession::new(&args.tools, args.builtins, mode).await {
        Ok(session) => session,
        Err(message) => {
            eprintln!("{message}");
            return EXIT_USAGE;
        }
    };
    // The approval hook needs the served state, which needs the registry with `run_code`:
    // it holds a slot filled once both exist.
    let served_slot: Arc<std::sync::OnceLock<std::sync::Weak<Served>>> = Arc::default();
    let approval_slot = served_slot.clone();
    let approval = move |request| {
        let served = approval_slot.get().cloned().unwrap_or_default();
        codemode_runtime::tools::ApprovalHook::request(&ElicitApproval(served), request)
    };
    // Upstream servers' questions go to the client of the session whose call asked.
    session
        .questions
        .answer_with(Arc::new(codemode_mcp::server::ForwardQuestions(
            served_slot.clone(),
        )));
    // The sandbox is prepared in the background: `initialize` is answered at once, and runs
    // wait for it (their clients get progress notifications meanwhile).
    // A client that asks for progress hears of each call its program makes.
    session
        .call_sinks
        .push(Arc::new(codemode_mcp::progress::NestedCalls));
    let readiness = match session.install_run_code_preparing(
        &args.budget,
        &args.tools.ask,
        approval,
        pausing,
    ) {
        Ok(readiness) => readiness,
        Err(message) => {
            eprintln!("{message}");
            return EXIT_USAGE;
        }
    };
    let presentation = Presentation {
        native_tools: args.mode == ServeMode::Both,
        sdk_budget: args.sdk_budget,
        flavor: Flavor::of(args.budget.language()),
    };
    let tools = permitted_tools(&session.registry, &session.policy);
    let served = Served::new(session.registry.clone(), tools, &presentation);
    let _ = served_slot.set(Arc::downgrade(&served));
    served.preparing(readiness.clone());
    if args.stateless {
        served.without_notifications();
    }
    if let Some(pausing) = served_pausing {
        served.keep_paused_runs(pausing);
    }
    if let Some(tasks) = served_tasks {
        served.run_tasks(tasks);
    }
    if let Some(exec) = session.exec.clone() {
        // A client's jobs and terminals end with its session.
        served.on_session_end(Arc::new(move |agent| {
            let exec = exec.clone();
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                runtime.spawn(async move { exec.dispose_owner(agent).await });
            }
        }));
    }

    // A server started again with other tools, or one that said its tools changed: clients
    // are told of the new list.
    let mut changes = session.tool_changes();
    let (registry, policy, refreshed) = (
        session.registry.clone(),
        session.policy.clone(),
        served.clone(),
    );
    let refresher = tokio::spawn(async move {
        while changes.changed().await.is_ok() {
            refreshed.tools_changed(permitted_tools(&registry, &policy));
        }
    });
    let outcome = match http {
        None => serve_stdio(&served).await,
        Some(setup) => {
            let observed = super::probes::Observed {
                metrics,
                readiness,
                upstreams: Box::new(session.upstream_health()),
            };
            super::http::serve(served.clone(), setup, observed).await
        }
    };
    refresher.abort();
    session.shutdown().await;
    drop(session);
    match outcome {
        Ok(()) => EXIT_OK,
        Err(message) => {
            tracing::error!("{message}");
            EXIT_PROGRAM_FAILED
        }
    }
}

async fn serve_stdio(served: &Arc<Served>) -> Result<(), String> {
    let running = served
        .session()
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| format!("the client did not initialize: {e}"))?;
    let stop = running.cancellation_token();
    tokio::select! {
        waited = running.waiting() => waited.map(|_| ()).map_err(|e| e.to_string()),
        () = super::stop_requested() => {
            stop.cancel();
            Ok(())
        }
    }
}
