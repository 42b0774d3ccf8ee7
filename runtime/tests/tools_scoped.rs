//! Scopes: layering, shadowing, restrictions, guards, presentation modes and the Code Mode
//! collapse, plus the parallel/exclusive classification (ported from the reference's scoped,
//! execution-mode and code-mode suites where they apply).

mod tools_support;

use std::sync::{Arc, Mutex};

use codemode_runtime::signal::AbortSignal;
use codemode_runtime::tools::schema::dsl::*;
use codemode_runtime::tools::*;
use serde_json::json;
use tools_support::{echo, input, keep, run, signalled};

fn names(registry: &Registry, scope: Option<&AgentScope>) -> Vec<String> {
    registry
        .schemas(scope)
        .into_iter()
        .map(|s| s.name)
        .collect()
}

fn described(name: &str, description: &str) -> ToolDefinition {
    let definition = echo(name);
    ToolDefinitionBuilder::from(definition)
        .description(description)
        .build()
}

fn allow(names: &[&str]) -> Restriction {
    Restriction {
        allow: Some(names.iter().map(|s| s.to_string()).collect()),
        deny: None,
    }
}

fn deny(names: &[&str]) -> Restriction {
    Restriction {
        allow: None,
        deny: Some(names.iter().map(|s| s.to_string()).collect()),
    }
}

#[tokio::test]
async fn a_scoped_tool_is_visible_and_executable_for_that_scope_only() {
    let registry = Registry::new();
    let agent = AgentScope::root();
    let other = AgentScope::root();
    registry
        .register(echo("local"), Some(&agent))
        .unwrap()
        .keep();
    assert_eq!(names(&registry, Some(&agent)), ["local"]);
    assert!(names(&registry, Some(&other)).is_empty());
    assert!(names(&registry, None).is_empty());
    assert!(!registry
        .execute(input("local", json!({})).agent(&agent))
        .await
        .is_error());
    let elsewhere = registry
        .execute(input("local", json!({})).agent(&other))
        .await;
    assert_eq!(elsewhere.error_code(), Some("UNKNOWN_TOOL"));
    // A child scope inherits it.
    let child = agent.child();
    assert_eq!(names(&registry, Some(&child)), ["local"]);
}

#[test]
fn scoped_shadows_global_in_either_registration_order_and_keeps_its_slot() {
    let registry = Registry::new();
    let agent = AgentScope::root();
    registry
        .register(described("a", "global a"), None)
        .unwrap()
        .keep();
    registry
        .register(described("b", "global b"), None)
        .unwrap()
        .keep();
    registry
        .register(described("a", "scoped a"), Some(&agent))
        .unwrap()
        .keep();
    let schemas = registry.schemas(Some(&agent));
    assert_eq!(
        schemas
            .iter()
            .map(|s| (
                s.name.as_str(),
                s.description.as_deref().unwrap_or_default()
            ))
            .collect::<Vec<_>>(),
        [("a", "scoped a"), ("b", "global b")]
    );
    let later = AgentScope::root();
    registry
        .register(described("c", "scoped c"), Some(&later))
        .unwrap()
        .keep();
    registry
        .register(described("c", "global c"), None)
        .unwrap()
        .keep();
    assert_eq!(
        registry.get("c", Some(&later)).unwrap().description(),
        "scoped c"
    );
    assert_eq!(registry.get("c", None).unwrap().description(), "global c");
}

#[test]
fn dropping_scope_registrations_leaves_no_residue() {
    let registry = Registry::new();
    let agent = AgentScope::root();
    registry.register(echo("g"), None).unwrap().keep();
    let guards = registry
        .register(echo("local"), Some(&agent))
        .unwrap()
        .merge(registry.restrict(&agent, deny(&["g"])).unwrap())
        .merge(registry.present_as(&agent, ToolMode::Both).unwrap())
        .merge(registry.guard(Some(&agent), |_| Some("no".into())));
    assert_eq!(names(&registry, Some(&agent)), ["local"]);
    drop(guards);
    assert_eq!(names(&registry, Some(&agent)), ["g"]);
    assert_eq!(registry.mode_for(Some(&agent)), ToolMode::Native);
}

#[test]
fn masks_globals_then_merges_scope_local_tools() {
    let registry = Registry::new();
    let agent = AgentScope::root();
    for name in ["read", "write", "grep"] {
        registry.register(echo(name), None).unwrap().keep();
    }
    registry
        .restrict(&agent, allow(&["read", "grep"]))
        .unwrap()
        .keep();
    registry
        .register(echo("report"), Some(&agent))
        .unwrap()
        .keep();
    assert_eq!(names(&registry, Some(&agent)), ["read", "grep", "report"]);
    // `allow` excludes globals registered later; `deny` admits them.
    registry.register(echo("late"), None).unwrap().keep();
    assert_eq!(names(&registry, Some(&agent)), ["read", "grep", "report"]);
    let denying = AgentScope::root();
    registry
        .restrict(&denying, deny(&["write"]))
        .unwrap()
        .keep();
    registry.register(echo("later"), None).unwrap().keep();
    assert_eq!(
        names(&registry, Some(&denying)),
        ["read", "grep", "late", "later"]
    );
}

#[tokio::test]
async fn restrictions_intersect_and_lift_independently() {
    let registry = Registry::new();
    let agent = AgentScope::root();
    for name in ["a", "b", "c"] {
        registry.register(echo(name), None).unwrap().keep();
    }
    let first = registry.restrict(&agent, allow(&["a", "b"])).unwrap();
    let second = registry.restrict(&agent, deny(&["b"])).unwrap();
    assert_eq!(names(&registry, Some(&agent)), ["a"]);
    let hidden = registry.execute(input("c", json!({})).agent(&agent)).await;
    assert_eq!(hidden.error_code(), Some("UNKNOWN_TOOL"));
    drop(first);
    assert_eq!(names(&registry, Some(&agent)), ["a", "c"]);
    drop(second);
    assert_eq!(names(&registry, Some(&agent)), ["a", "b", "c"]);
}

#[test]
fn restrict_fails_loud_on_empty_filters_reserved_and_unknown_names() {
    let registry = Registry::new();
    let agent = AgentScope::root();
    assert_eq!(
        registry.restrict(&agent, Restriction::default()).err().unwrap().to_string(),
        "tools.restrict({}) is a no-op: pass `allow` and/or `deny` (an empty filter is almost always a materialized-empty-config bug)"
    );
    assert_eq!(
        registry.restrict(&agent, deny(&["run_code"])).err().unwrap().to_string(),
        "tools.restrict() cannot name reserved Code Mode presentation transport \"run_code\"; restrict end-capability tools instead"
    );
    assert_eq!(
        registry
            .restrict(&agent, deny(&["x"]))
            .err()
            .unwrap()
            .to_string(),
        "tools.restrict() names unknown global tool \"x\"; known global tools: (none)"
    );
    registry.register(echo("zeta"), None).unwrap().keep();
    registry.register(echo("alpha"), None).unwrap().keep();
    registry
        .register(echo("mine"), Some(&agent))
        .unwrap()
        .keep();
    assert_eq!(
        registry.restrict(&agent, allow(&["x", "mine"])).err().unwrap().to_string(),
        "tools.restrict() names unknown global tools \"x\", \"mine\"; known global tools: alpha, zeta"
    );
}

#[test]
fn filters_what_a_child_inherits_from_an_ancestor_but_not_its_own() {
    let registry = Registry::new();
    let parent = AgentScope::root();
    let child = parent.child();
    registry.register(echo("global"), None).unwrap().keep();
    registry
        .register(echo("from_parent"), Some(&parent))
        .unwrap()
        .keep();
    registry.register(echo("own"), Some(&child)).unwrap().keep();
    registry
        .restrict(&child, allow(&["global"]))
        .unwrap()
        .keep();
    assert_eq!(names(&registry, Some(&child)), ["global", "own"]);
    // An ancestor's restriction reaches every nested scope.
    registry
        .restrict(&parent, deny(&["global"]))
        .unwrap()
        .keep();
    assert_eq!(names(&registry, Some(&child)), ["own"]);
    assert_eq!(names(&registry, Some(&parent)), ["from_parent"]);
    // For a grandchild, the child's registrations are inherited, so the child's mask applies.
    let grandchild = child.child();
    assert!(names(&registry, Some(&grandchild)).is_empty());
}

#[tokio::test]
async fn guards_are_monotonic_and_run_global_first_then_farthest_scope() {
    let registry = Registry::new();
    registry.register(echo("t"), None).unwrap().keep();
    let parent = AgentScope::root();
    let child = parent.child();
    let order = Arc::new(Mutex::new(Vec::new()));
    for (label, scope, verdict) in [
        ("child", Some(&child), None),
        ("parent", Some(&parent), None),
        ("global", None, None::<String>),
    ] {
        let o = order.clone();
        registry
            .guard(scope, move |_| {
                o.lock().unwrap().push(label);
                verdict.clone()
            })
            .keep();
    }
    registry
        .on_pre_execute(|_, _| async { Ok(PreDecision::Allow) })
        .keep();
    assert!(!registry
        .execute(input("t", json!({})).agent(&child))
        .await
        .is_error());
    assert_eq!(*order.lock().unwrap(), ["global", "parent", "child"]);
    registry
        .guard(None, |_| Some("global says no".into()))
        .keep();
    let denied = registry.execute(input("t", json!({})).agent(&child)).await;
    assert_eq!(
        denied.error(),
        Some(&ToolFailure {
            message: "global says no".into(),
            info: None
        })
    );
    // A host-level call only meets global guards.
    order.lock().unwrap().clear();
    run(&registry, "t", json!({})).await;
    assert_eq!(*order.lock().unwrap(), ["global"]);
}

#[tokio::test]
async fn guards_only_run_for_allowed_calls_and_are_live() {
    let registry = Registry::new();
    registry.register(echo("t"), None).unwrap().keep();
    let calls = Arc::new(Mutex::new(0));
    let c = calls.clone();
    registry
        .guard(None, move |_| {
            *c.lock().unwrap() += 1;
            None
        })
        .keep();
    let deny_all = registry.on_pre_execute(|_, _| async {
        Ok(PreDecision::Deny {
            reason: "pre".into(),
        })
    });
    run(&registry, "t", json!({})).await;
    assert_eq!(*calls.lock().unwrap(), 0);
    drop(deny_all);
    // A guard may register another guard; registrations never deadlock the registry.
    let r = registry.clone();
    let added = Arc::new(Mutex::new(Vec::new()));
    let a = added.clone();
    registry
        .guard(None, move |_| {
            let mut added = a.lock().unwrap();
            if added.is_empty() {
                added.push(r.guard(None, |_| Some("late guard".into())));
            }
            None
        })
        .keep();
    assert!(!run(&registry, "t", json!({})).await.is_error());
    assert_eq!(
        run(&registry, "t", json!({}))
            .await
            .error()
            .unwrap()
            .message,
        "late guard"
    );
}

#[tokio::test]
async fn one_token_and_one_argument_snapshot_are_shared_across_the_pipeline() {
    let registry = Registry::new();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    keep(
        &registry,
        tools_support::tool("t", move |args, run_ctx| {
            s.lock()
                .unwrap()
                .push((run_ctx.token(), Arc::as_ptr(&args) as usize));
            async { Ok(json!(1)) }
        }),
    );
    let s = seen.clone();
    registry
        .on_pre_execute(move |call, next| {
            s.lock()
                .unwrap()
                .push((call.token(), Arc::as_ptr(call.arguments()) as usize));
            next.run()
        })
        .keep();
    let s = seen.clone();
    registry
        .on_result(move |call, _| {
            s.lock()
                .unwrap()
                .push((call.token(), Arc::as_ptr(call.arguments()) as usize));
            Ok(())
        })
        .keep();
    run(&registry, "t", json!({"x": [1]})).await;
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 3);
    assert!(seen.iter().all(|entry| *entry == seen[0]));
}

#[test]
fn present_as_is_once_per_scope_and_the_nearest_wins() {
    let registry = Registry::with_mode(ToolMode::Native);
    let preset = AgentScope::root();
    let agent = preset.child();
    registry.present_as(&preset, ToolMode::Code).unwrap().keep();
    assert_eq!(registry.mode_for(Some(&agent)), ToolMode::Code);
    assert_eq!(
        registry.present_as(&preset, ToolMode::Both).err().unwrap().to_string(),
        "tools.presentAs(\"both\") conflicts with \"code\" already declared for this scope; one composition selects one presentation"
    );
    let opt_out = registry.present_as(&agent, ToolMode::Native).unwrap();
    assert_eq!(registry.mode_for(Some(&agent)), ToolMode::Native);
    drop(opt_out);
    assert_eq!(registry.mode_for(Some(&agent)), ToolMode::Code);
    assert_eq!(registry.mode_for(None), ToolMode::Native);
    assert_eq!(
        Registry::with_mode(ToolMode::Code).mode_for(Some(&agent)),
        ToolMode::Code
    );
}

#[tokio::test]
async fn a_model_direct_call_under_code_mode_collapses_to_unknown_tool() {
    let registry = Registry::with_mode(ToolMode::Code);
    let bodies = Arc::new(Mutex::new(0));
    let b = bodies.clone();
    keep(
        &registry,
        tools_support::tool("write", move |_, _| {
            *b.lock().unwrap() += 1;
            async { Ok(json!(1)) }
        }),
    );
    let pre = Arc::new(Mutex::new(0));
    let p = pre.clone();
    registry
        .on_pre_execute(move |_, next| {
            *p.lock().unwrap() += 1;
            next.run()
        })
        .keep();
    let result = run(&registry, "write", json!({})).await;
    assert_eq!(
        result.error().unwrap().message,
        "unknown tool \"write\": only `run_code` is callable directly — call `write` from inside a `run_code` program instead"
    );
    let info = result.error().unwrap().info.clone().unwrap();
    assert_eq!(
        (info.name.as_str(), info.code.as_str()),
        ("ToolNotFoundError", "UNKNOWN_TOOL")
    );
    assert_eq!((*pre.lock().unwrap(), *bodies.lock().unwrap()), (0, 0));
    // Pre-aborted: the abort wins over the collapse.
    let aborted = registry
        .execute(signalled(
            "write",
            json!({}),
            AbortSignal::aborted_with("x"),
        ))
        .await;
    assert_eq!(aborted.error_code(), Some("ABORTED_BEFORE_DISPATCH"));
    // A genuinely unknown name keeps the plain message, after policy saw the call.
    assert_eq!(
        run(&registry, "ghost", json!({}))
            .await
            .error()
            .unwrap()
            .message,
        "unknown tool \"ghost\""
    );
    assert_eq!(*pre.lock().unwrap(), 1);
    // Nested dispatches (a program's calls) are exempt.
    let token = {
        let slot = Arc::new(Mutex::new(None));
        let s = slot.clone();
        let _g = registry.on_call(move |call| *s.lock().unwrap() = Some(call.token()));
        run(&registry, "ghost", json!({})).await;
        let token = slot.lock().unwrap().take();
        token.expect("observed")
    };
    assert!(!registry
        .execute(input("write", json!({})).parent(token))
        .await
        .is_error());
    assert_eq!(*bodies.lock().unwrap(), 1);
}

#[tokio::test]
async fn both_mode_does_not_collapse_and_the_transport_joins_non_native_views() {
    let registry = Registry::with_mode(ToolMode::Both);
    registry.register(echo("echo"), None).unwrap().keep();
    assert!(!run(&registry, "echo", json!({})).await.is_error());
    let transport = ToolDefinition::builder("run_code")
        .output(ToolOutput::text())
        .execute(|_, _| async { Ok(json!("ran")) })
        .build();
    let _transport = registry.set_code_transport(transport);
    assert_eq!(names(&registry, None), ["echo", "run_code"]);
    assert!(!run(&registry, "run_code", json!({})).await.is_error());
    let native = AgentScope::root();
    registry
        .present_as(&native, ToolMode::Native)
        .unwrap()
        .keep();
    assert_eq!(names(&registry, Some(&native)), ["echo"]);
    let hidden = registry
        .execute(input("run_code", json!({})).agent(&native))
        .await;
    assert_eq!(hidden.error_code(), Some("UNKNOWN_TOOL"));
}

fn classified(
    name: &str,
    classifier: impl Fn(&serde_json::Value) -> bool + Send + Sync + 'static,
) -> ToolDefinition {
    ToolDefinition::builder(name)
        .parameters(Schema::parameters(Parameters::new().optional("kind", string())).unwrap())
        .output(ToolOutput::text())
        .execute(|_, _| async { Ok(json!("x")) })
        .concurrency_safe(classifier)
        .build()
}

#[test]
fn execution_mode_is_parallel_only_for_an_explicit_true() {
    let registry = Registry::new();
    registry
        .register(classified("safe", |args| args["kind"] == "read"), None)
        .unwrap()
        .keep();
    registry.register(echo("plain"), None).unwrap().keep();
    registry
        .register(classified("panics", |_| panic!("classifier broke")), None)
        .unwrap()
        .keep();
    let mode = |name: &str, args| registry.execution_mode(&input(name, args));
    assert_eq!(
        mode("safe", json!({"kind": "read"})),
        ExecutionMode::Parallel
    );
    assert_eq!(
        mode("safe", json!({"kind": "write"})),
        ExecutionMode::Exclusive
    );
    assert_eq!(
        mode("safe", json!({"kind": 1})),
        ExecutionMode::Exclusive,
        "invalid args"
    );
    assert_eq!(
        mode("plain", json!({})),
        ExecutionMode::Exclusive,
        "no classifier"
    );
    assert_eq!(
        mode("ghost", json!({})),
        ExecutionMode::Exclusive,
        "unknown"
    );
    assert_eq!(
        mode("panics", json!({})),
        ExecutionMode::Exclusive,
        "panicking classifier"
    );
    assert!(registry
        .schemas(None)
        .iter()
        .all(|s| !s.parameters.to_string().contains("concurrency")));
}

#[test]
fn execution_mode_follows_the_visible_collapse_aware_definition() {
    let registry = Registry::new();
    let agent = AgentScope::root();
    registry
        .register(classified("safe", |_| true), None)
        .unwrap()
        .keep();
    registry.restrict(&agent, deny(&["safe"])).unwrap().keep();
    assert_eq!(
        registry.execution_mode(&input("safe", json!({}))),
        ExecutionMode::Parallel
    );
    assert_eq!(
        registry.execution_mode(&input("safe", json!({})).agent(&agent)),
        ExecutionMode::Exclusive,
        "hidden"
    );
    let coder = AgentScope::root();
    registry.present_as(&coder, ToolMode::Code).unwrap().keep();
    assert_eq!(
        registry.execution_mode(&input("safe", json!({})).agent(&coder)),
        ExecutionMode::Exclusive,
        "collapsed"
    );
}

#[test]
fn schemas_snapshot_deeply_nested_parameters_without_recursion() {
    let mut spec: ValueSpec = string().into();
    for _ in 0..5_000 {
        spec = object(false).required("a", spec).into();
    }
    let registry = Registry::new();
    let definition = ToolDefinition::builder("deep")
        .parameters(Schema::parameters(Parameters::new().required("root", spec)).unwrap())
        .output(ToolOutput::text())
        .execute(|_, _| async { Ok(json!("x")) })
        .build();
    registry.register(definition, None).unwrap().keep();
    let mut schemas = registry.schemas(None);
    let parameters = std::mem::take(&mut schemas[0].parameters);
    // Take the copy apart by move; `Value`'s own drop would recurse per level.
    let mut pending = vec![parameters];
    let mut depth_seen = 0;
    while let Some(next) = pending.pop() {
        if let serde_json::Value::Object(map) = next {
            depth_seen += 1;
            pending.extend(map.into_iter().map(|(_, v)| v));
        }
    }
    assert!(depth_seen > 10_000);
}

#[test]
fn unregistering_a_callback_that_owns_another_registration_does_not_deadlock() {
    let registry = Registry::new();
    let inner_tool = registry.register(echo("inner"), None).unwrap();
    let inner_hook = registry.on_call(|_| {});
    let owner = registry.on_result(move |_, _| {
        let _keep = (&inner_tool, &inner_hook);
        Ok(())
    });
    let guard_owner = {
        let nested = registry.guard(None, |_| None);
        registry.guard(None, move |_| {
            let _keep = &nested;
            None
        })
    };
    drop(owner);
    drop(guard_owner);
    assert!(registry.get("inner", None).is_none());
}

#[tokio::test]
async fn a_scoped_pre_execute_hook_gates_only_its_own_agent_and_never_subject_less_calls() {
    let registry = Registry::new();
    registry.register(echo("t"), None).unwrap().keep();
    let agent = AgentScope::root();
    let other = AgentScope::root();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    let scoped = registry.on_pre_execute_in(&agent, move |call, _| {
        s.lock().unwrap().push(call.agent().map(AgentScope::id));
        async {
            Ok(PreDecision::Deny {
                reason: "scoped veto".into(),
            })
        }
    });
    let text = |agent: Option<&AgentScope>| {
        let mut call = input("t", json!({}));
        call.agent = agent.cloned();
        let registry = registry.clone();
        async move { registry.execute(call).await.text() }
    };
    assert_eq!(text(Some(&agent)).await, "Error: scoped veto");
    assert_eq!(
        text(Some(&agent.child())).await,
        "Error: scoped veto",
        "nested agents are covered"
    );
    assert_eq!(text(Some(&other)).await, "ok");
    assert_eq!(text(None).await, "ok");
    assert_eq!(seen.lock().unwrap().len(), 2);
    drop(scoped);
    assert_eq!(text(Some(&agent)).await, "ok");
}
