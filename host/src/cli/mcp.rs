//! `codemode mcp`: serve `run_code` over stdio (the default) or streamable HTTP at `/mcp`.

use std::sync::Arc;

use codemode_host::mcp::server::{permitted_tools, ElicitApproval, Presentation, Served};
use codemode_runtime::run_code::TYPESCRIPT_FLAVOR;
use codemode_runtime::tools::ToolMode;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::ServiceExt;

use super::session::ToolSession;
use super::{McpArgs, ServeMode, EXIT_OK, EXIT_PROGRAM_FAILED, EXIT_USAGE};

pub async fn serve(args: McpArgs) -> u8 {
    let mode = match args.mode {
        ServeMode::Code => ToolMode::Code,
        ServeMode::Both => ToolMode::Both,
    };
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
    if let Err(message) =
        session.install_run_code(&args.budget, &args.tools.ask, approval, None, None)
    {
        eprintln!("{message}");
        return EXIT_USAGE;
    }
    let presentation = Presentation {
        native_tools: args.mode == ServeMode::Both,
        sdk_budget: args.sdk_budget,
        flavor: &TYPESCRIPT_FLAVOR,
    };
    let tools = permitted_tools(&session.registry, &session.policy);
    let served = Served::new(session.registry.clone(), tools, &presentation);
    let _ = served_slot.set(Arc::downgrade(&served));
    if let Some(exec) = session.exec.clone() {
        // A client's jobs and terminals end with its session.
        served.on_session_end(Arc::new(move |agent| {
            let exec = exec.clone();
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                runtime.spawn(async move { exec.dispose_owner(agent).await });
            }
        }));
    }

    let outcome = match &args.http {
        None => serve_stdio(&served).await,
        Some(addr) => serve_http(served.clone(), addr, &args.allowed_hosts).await,
    };
    session.shutdown().await;
    drop(session);
    match outcome {
        Ok(()) => EXIT_OK,
        Err(message) => {
            eprintln!("codemode mcp: {message}");
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

async fn serve_http(served: Arc<Served>, addr: &str, hosts: &[String]) -> Result<(), String> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| format!("cannot listen on {addr}: {e}"))?;
    let local = listener.local_addr().map_err(|e| e.to_string())?;
    let stop = tokio_util::sync::CancellationToken::new();
    let mut allowed: Vec<String> = vec!["localhost".into(), "127.0.0.1".into(), "::1".into()];
    allowed.extend(hosts.iter().cloned());
    let config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(allowed)
        .with_cancellation_token(stop.child_token());
    let factory = served.clone();
    let service = StreamableHttpService::new(
        move || Ok(factory.session()),
        LocalSessionManager::default().into(),
        config,
    );
    let router = axum::Router::new().nest_service("/mcp", service);
    eprintln!("codemode: serving MCP at http://{local}/mcp");
    axum::serve(listener, router)
        .with_graceful_shutdown(async move {
            super::stop_requested().await;
            stop.cancel();
        })
        .await
        .map_err(|e| e.to_string())
}
