//! Programs that try to break the boundary from inside the real guest.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use codemode_e2e::*;
use codemode_runtime::code::{binding, FailureKind};

#[tokio::test]
async fn lossy_arguments_are_rejected_in_the_guest_before_the_host() {
    let calls = Arc::new(AtomicUsize::new(0));
    let ns = tools(vec![("echo", counted(calls.clone()))]);
    let r = run_on(
        &runtime(),
        r#"
        const bad: any[] = [new Date(), Object.assign([1], { x: 1 }), () => 1, -0, [1, , 2], undefined, 1n, NaN];
        const cyclic: any = {}; cyclic.self = cyclic; bad.push(cyclic);
        const out: string[] = [];
        for (const b of bad) {
          try { await tools.echo(b); out.push('sent'); }
          catch (e) { out.push(`${e.name}:${e.toolName}:${e.message}`); }
        }
        return out;
        "#,
        vec![ns],
        None,
    )
    .await;
    let v = value(&r);
    for item in v.as_array().unwrap() {
        assert_eq!(
            item,
            &json!("ToolCallError:echo:binding arguments must be lossless JSON")
        );
    }
    assert_eq!(calls.load(Ordering::SeqCst), 0);
    assert!(r.calls.is_empty());
}

#[tokio::test]
async fn mutated_boundary_globals_do_not_change_transport_or_validation() {
    let r = run(
        r#"
        (JSON as any).stringify = () => 'forged';
        (Array as any).isArray = () => false;
        (Object as any).keys = () => [];
        (Reflect as any).ownKeys = () => [];
        (Object as any).getPrototypeOf = () => null;
        (globalThis as any).Promise = function () { throw new Error('no'); };
        Object.defineProperty(Array.prototype, '0', { set() { throw new Error('trap'); }, configurable: true });
        const echoed = await tools.echo({ list: [1, 2, { k: 'v' }], s: 'x"y' });
        return { echoed, date: (() => { try { return 'ok'; } catch { return 'no'; } })() };
        "#,
    )
    .await;
    assert_eq!(
        value(&r),
        json!({"echoed": {"list": [1, 2, {"k": "v"}], "s": "x\"y"}, "date": "ok"})
    );
}

#[tokio::test]
async fn spoofed_prototypes_are_rejected_as_completions() {
    let r =
        run("const o = Object.create(Object.create(Object.prototype)); o.a = 1; return o;").await;
    failure(&r, FailureKind::InvalidOutput);
    let r = run("class A extends Array {}; return A.from([1]);").await;
    failure(&r, FailureKind::InvalidOutput);
}

#[tokio::test]
async fn a_non_lossless_resolution_is_a_typed_failure() {
    let ns = tools(vec![("neg", binding(|_, _| async { Ok(json!([-0.0])) }))]);
    let r = run_on(
        &runtime(),
        "try { await tools.neg({}); } catch (e) { return [e.name, e.toolName, e.message]; }",
        vec![ns],
        None,
    )
    .await;
    assert_eq!(
        value(&r),
        json!([
            "ToolCallError",
            "neg",
            "binding resolution must be lossless JSON"
        ])
    );
}

#[tokio::test]
async fn the_injected_error_class_survives_global_tampering() {
    let ns = tools(vec![("nope", failing("denied"))]);
    let r = run_on(
        &runtime(),
        r#"
        (globalThis as any).Error = function () { return { forged: true }; };
        Object.defineProperty(Object.prototype, 'toolName', { get() { return 'forged'; }, configurable: true });
        try { await tools.nope({}); } catch (e) { return [e instanceof ToolCallError, e.toolName, e.message]; }
        "#,
        vec![ns],
        None,
    )
    .await;
    assert_eq!(value(&r), json!([true, "nope", "denied"]));
}

#[tokio::test]
async fn the_namespace_cannot_be_mutated() {
    let r = run(r#"
        'use strict';
        const attempts: string[] = [];
        try { (tools as any).echo = () => 'forged'; } catch (e) { attempts.push('assign'); }
        try { delete (tools as any).echo; } catch (e) { attempts.push('delete'); }
        try { (tools as any).extra = 1; } catch (e) { attempts.push('add'); }
        return [attempts, await tools.echo({ ok: true })];
        "#)
    .await;
    assert_eq!(
        value(&r),
        json!([["assign", "delete", "add"], {"ok": true}])
    );
}

#[tokio::test]
async fn a_throwing_console_argument_is_contained() {
    let r = run(
        r#"
        const evil = new Proxy({}, { ownKeys() { throw new Error('boom'); }, getPrototypeOf() { throw new Error('boom'); } });
        console.log('value:', evil);
        return 'survived';
        "#,
    )
    .await;
    assert_eq!(value(&r), json!("survived"));
    assert_eq!(r.logs.len(), 1);
}

#[tokio::test]
async fn deep_recursion_is_a_clean_failure_and_the_host_carries_on() {
    let r = run("function f(n: number): number { return f(n + 1) + 1; }\nreturn f(0);").await;
    let error = r.error.clone().expect("fails");
    assert!(
        matches!(error.kind, FailureKind::Exception | FailureKind::WorkerExit),
        "{error:?}"
    );
    assert_eq!(value(&run("return 'next';").await), json!("next"));
}

#[tokio::test]
async fn a_thrown_error_from_a_timer_fails_the_run() {
    let r = run("setTimeout(() => { throw new Error('late boom'); }, 1);\nawait new Promise(r => setTimeout(r, 50));").await;
    let message = failure(&r, FailureKind::Exception);
    assert_eq!(message, "Error: late boom");
}

#[tokio::test]
async fn a_program_cannot_close_the_function_it_is_wrapped_in() {
    let r = run("} + (globalThis.escaped = 1), function () {").await;
    let message = failure(&r, FailureKind::Exception);
    assert!(message.contains("body of one function"), "{message}");
    // An ordinary program that happens to contain functions is untouched.
    let r = run("function inner() { return 2; }\nreturn (async () => inner())();").await;
    assert_eq!(value(&r), json!(2));
}
