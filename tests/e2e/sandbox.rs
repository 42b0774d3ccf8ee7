//! Programs and bindings through the real guest and real wasmtime. (Runs queueing for the
//! pool's slots are in the `whole_process` binary: they take every slot of the process.)

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use codemode_e2e::*;
use codemode_runtime::code::{CallOutcome, CodeRuntime, FailureKind, RunRejection, RunRequest};
use codemode_runtime::signal::AbortController;

#[tokio::test]
async fn describes_itself_as_typescript_in_wasm() {
    let rt = runtime();
    assert_eq!(rt.language().name(), "typescript");
    assert_eq!(rt.isolation(), "wasm");
}

#[tokio::test]
async fn runs_erasable_typescript_with_ordered_logs_and_a_value() {
    let r = run(r#"
        interface P { x: number; y: number }
        const p: P = { x: 1, y: 2 };
        console.log('point', p);
        console.info('info', [1, 'two', null]);
        console.warn('careful');
        console.error(new Error('shown'));
        console.debug(undefined, true, 3n);
        return { sum: (p.x + p.y) as number };
    "#)
    .await;
    assert_eq!(value(&r), json!({"sum": 3}));
    assert_eq!(
        r.logs,
        vec![
            "point { x: 1, y: 2 }",
            "info [ 1, 'two', null ]",
            "careful",
            "Error: shown",
            "undefined true 3n",
        ]
    );
}

#[tokio::test]
async fn console_inspects_with_depth_and_length_limits() {
    let r = run(r#"
        console.log({ a: { b: { c: { d: { e: { f: 1 } } } } } });
        console.log(Array.from({ length: 102 }, (_, i) => i).length, [ ...Array(3) ].length);
        const big = Array.from({ length: 150 }, () => 0);
        console.log(big);
        console.log('x'.repeat(10005).length, ['y'.repeat(10003)]);
        const o = Object.create(null); o.k = 'v';
        console.log(o, new Map([['a', 1]]), new Set([1]), [function named() {}, () => 1]);
        class Thing { constructor() { this.z = 1; } }
        console.log(new Thing(), { 'needs-quotes': 1 }, "it's");
    "#)
    .await;
    assert!(r.error.is_none(), "{r:?}");
    assert_eq!(r.logs[0], "{ a: { b: { c: { d: [Object] } } } }");
    assert!(r.logs[2].contains("... 50 more items"), "{}", r.logs[2]);
    assert!(
        r.logs[3].starts_with("10005 [\n  'yyy"),
        "{}",
        &r.logs[3][..20]
    );
    assert!(
        r.logs[3].ends_with("'... 3 more characters\n]"),
        "{}",
        &r.logs[3][r.logs[3].len() - 40..]
    );
    assert_eq!(
        r.logs[4],
        "[Object: null prototype] { k: 'v' } Map(1) { 'a' => 1 } Set(1) { 1 } [ [Function: named], [Function (anonymous)] ]"
    );
    assert_eq!(r.logs[5], "Thing { z: 1 } { 'needs-quotes': 1 } it's");
}

/// The program is the body of a strict async function called without a `this`, given its
/// namespaces as arguments; however it is wrapped, the wrapper leaves no global behind.
#[tokio::test]
async fn the_program_is_the_body_of_a_strict_async_function() {
    let r = run(r#"
        let undeclared = 'assigned';
        try { notDeclared = 1; } catch (e) { undeclared = e.name; }
        return {
            thisValue: typeof this,
            argumentsAreTheNamespaces: arguments[0] === tools,
            undeclared,
            wrapperGlobals: Object.getOwnPropertyNames(globalThis).filter((n) => /codemode|ƒ/i.test(n)),
            awaited: await Promise.resolve(1),
        };
    "#)
    .await;
    assert_eq!(
        value(&r),
        json!({
            "thisValue": "undefined",
            "argumentsAreTheNamespaces": true,
            "undeclared": "ReferenceError",
            "wrapperGlobals": [],
            "awaited": 1,
        }),
        "{r:?}"
    );
}

/// Identifiers of ASCII letters, digits, `$` and `_` take the lexer's ASCII path; any other
/// character is looked up in Unicode's identifier sets.
#[tokio::test]
async fn identifiers_beyond_ascii_still_lex() {
    let r = run(r#"
        const café = 1, π = 2, $_x9 = 3, ಠ_ಠ = 4, \u0078y = 5, zero\u200Cwidth = 6;
        return [café + π + $_x9 + ಠ_ಠ + xy + zero\u200Cwidth, typeof ƒ];
    "#)
    .await;
    assert_eq!(value(&r), json!([21, "function"]), "{r:?}");
}

#[tokio::test]
async fn returning_nothing_has_no_value() {
    let r = run("console.log('only logs');").await;
    assert!(r.error.is_none());
    assert!(r.value.is_none());
    let doc = serde_json::to_value(&r).unwrap();
    assert!(doc.get("value").is_none());
}

#[tokio::test]
async fn bindings_resolve_and_reject_as_tool_call_errors() {
    let rt = runtime();
    let ns = tools(vec![
        ("echo", echo()),
        ("nope", failing("not on my watch")),
        ("raw", failing("raw-nope")),
    ]);
    let r = run_on(
        &rt,
        r#"
        const a = await tools.echo({ n: 1 });
        const out: string[] = [];
        for (const name of ['nope', 'raw'] as const) {
          try { await tools[name]({}); }
          catch (e) {
            out.push(`${e instanceof ToolCallError}:${e.name}:${e.toolName}:${e.message}:${e instanceof Error}`);
          }
        }
        return { a, out };
        "#,
        vec![ns],
        None,
    )
    .await;
    assert_eq!(
        value(&r),
        json!({"a": {"n": 1}, "out": [
            "true:ToolCallError:nope:not on my watch:true",
            "true:ToolCallError:raw:raw-nope:true"
        ]})
    );
    assert_eq!(r.calls.len(), 3);
    assert_eq!(r.calls[0].outcome, CallOutcome::Resolved);
    assert_eq!(r.calls[1].outcome, CallOutcome::Rejected);
}

#[tokio::test]
async fn a_consumer_declared_error_class_is_materialised() {
    let ns = namespace(
        "helpers",
        vec![("boom", failing("kaput"))],
        Some(("HelperCallError", "helperName")),
    );
    let r = run_on(
        &runtime(),
        r#"
        try { await helpers.boom({}); } catch (e) {
          return [e instanceof HelperCallError, e.name, e.helperName, e.message];
        }
        "#,
        vec![ns],
        None,
    )
    .await;
    assert_eq!(value(&r), json!([true, "HelperCallError", "boom", "kaput"]));
}

#[tokio::test]
async fn without_an_error_class_rejections_are_plain_errors() {
    let ns = namespace("plain", vec![("boom", failing("kaput"))], None);
    let r = run_on(
        &runtime(),
        "try { await plain.boom({}); } catch (e) { return [e.name, e.message, e.constructor === Error]; }",
        vec![ns],
        None,
    )
    .await;
    assert_eq!(value(&r), json!(["Error", "kaput", true]));
}

#[tokio::test]
async fn a_namespace_named_like_the_error_class_is_an_object() {
    let ns = namespace("ToolCallError", vec![("x", echo())], None);
    let r = run_on(&runtime(), "return typeof ToolCallError;", vec![ns], None).await;
    assert_eq!(value(&r), json!("object"));
}

#[tokio::test]
async fn deep_lossless_json_crosses_both_ways() {
    for depth in [3_000usize, 5_000] {
        let program = format!(
            r#"
            let v: any = 'leaf';
            for (let i = 0; i < {depth}; i++) v = i % 2 ? [v] : {{ k: v }};
            const back = await tools.echo(v);
            let d = 0; let cur: any = back;
            while (typeof cur === 'object') {{ cur = Array.isArray(cur) ? cur[0] : cur.k; d++; }}
            if (d !== {depth} || cur !== 'leaf') throw new Error('depth ' + d);
            return back;
            "#
        );
        let r = run(&program).await;
        assert!(r.error.is_none(), "{:?}", r.error);
        let mut v = r.value.expect("a value");
        let mut d = 0;
        loop {
            v = match v {
                serde_json::Value::Array(mut a) => a.remove(0),
                serde_json::Value::Object(mut o) => o.remove("k").expect("k"),
                other => {
                    assert_eq!(other, json!("leaf"));
                    break;
                }
            };
            d += 1;
        }
        assert_eq!(d, depth);
    }
}

#[tokio::test]
async fn a_fifty_thousand_element_array_returns_exactly() {
    let r = run("return Array.from({ length: 50000 }, (_, i) => i);").await;
    let v = value(&r);
    let items = v.as_array().expect("array");
    assert_eq!(items.len(), 50_000);
    assert_eq!(items[49_999], json!(49_999));
}

#[tokio::test]
async fn non_erasable_syntax_is_an_exception_with_its_position() {
    let r = run("const a = 1;\nenum Color { Red }\nreturn a;").await;
    let message = failure(&r, FailureKind::Exception);
    assert!(message.to_lowercase().contains("enum"), "{message}");
    let e = r.error.unwrap();
    assert_eq!((e.line, e.column), (Some(2), Some(1)));
}

#[tokio::test]
async fn syntax_errors_are_exceptions_with_positions() {
    let r = run("const ok = 1;\nconst = 2;").await;
    failure(&r, FailureKind::Exception);
    assert_eq!(r.error.unwrap().line, Some(2));
}

#[tokio::test]
async fn runtime_throws_carry_the_typescript_line_and_column() {
    let r = run("const a: number = 1;\nconsole.log('before');\n  throw new TypeError('bad ' + a);")
        .await;
    let message = failure(&r, FailureKind::Exception);
    assert_eq!(message, "TypeError: bad 1");
    let e = r.error.clone().unwrap();
    assert_eq!(e.line, Some(3));
    assert_eq!(e.column, Some(9));
    assert_eq!(
        r.logs,
        vec!["before"],
        "logs printed before a failure are kept"
    );
}

#[tokio::test]
async fn thrown_non_errors_render_as_strings() {
    let r = run("throw 'plain text';").await;
    assert_eq!(failure(&r, FailureKind::Exception), "plain text");
    let r = run("throw { toString() { throw new Error('no'); } };").await;
    assert_eq!(
        failure(&r, FailureKind::Exception),
        "program threw an unrenderable value"
    );
}

#[tokio::test]
async fn engine_errors_point_into_the_program() {
    let r = run("const o: any = undefined;\nreturn o.field;").await;
    let message = failure(&r, FailureKind::Exception);
    assert!(message.starts_with("TypeError"), "{message}");
    assert_eq!(r.error.unwrap().line, Some(2));
}

#[tokio::test]
async fn the_environment_is_empty() {
    let r = run(
        "return [typeof process, typeof require, typeof fetch, typeof globalThis.Deno, typeof WebAssembly];",
    )
    .await;
    assert_eq!(
        value(&r),
        json!([
            "undefined",
            "undefined",
            "undefined",
            "undefined",
            "undefined"
        ])
    );
}

#[tokio::test]
async fn non_lossless_completions_are_invalid_output() {
    for program in [
        "return -0;",
        "return new Date(0);",
        "return { f() {} };",
        "return [1, , 3];",
        "return NaN;",
        "return { a: undefined };",
        "const a: any[] = []; a.push(a); return a;",
        "class X {}; return new X();",
        "return Object.assign([1], { extra: true });",
        "return { get boom() { throw new Error('x'); } };",
        "return new Map();",
        "return { [Symbol('s')]: 1 };",
        // Exotic objects and values that change while they are read.
        "return new Proxy({}, {});",
        "return new Proxy([1], {});",
        "const o = {}; Object.defineProperty(o, 'hidden', { value: 1 }); return o;",
        "const a: any[] = [1, 2, 3]; Object.defineProperty(a, 1, { get() { a.pop(); return 2; } }); return a;",
        "return Object.setPrototypeOf({}, Array.prototype);",
        "return 10n;",
        "return [Symbol.iterator];",
        "return function () {};",
    ] {
        let r = run(program).await;
        assert_eq!(
            failure(&r, FailureKind::InvalidOutput),
            "program completion must be lossless JSON",
            "{program}"
        );
    }
}

#[tokio::test]
async fn numbers_strings_and_keys_are_written_as_javascript_spells_them() {
    let r = run(
        r#"return [1e21, 0.1, 5e-7, -1.5, 2 ** 53, 1 / 3, { 2: 'b', 1: 'a', z: 'c' }, 'é\u0000"\n', '\ud800x'];"#,
    )
    .await;
    assert!(r.error.is_none(), "{:?}", r.error);
    assert_eq!(
        serde_json::to_string(&value(&r)).unwrap(),
        "[1e+21,0.1,5e-7,-1.5,9007199254740992,0.3333333333333333,{\"1\":\"a\",\"2\":\"b\",\"z\":\"c\"},\"é\\u0000\\\"\\n\",\"\u{FFFD}x\"]"
    );
}

#[tokio::test]
async fn a_binding_called_from_a_getter_of_its_own_argument_is_refused() {
    let r = run(r#"let inner: any;
           const arg = { get x() { inner = tools.echo({ y: 1 }); return 1; } };
           const outer = await tools.echo(arg);
           let message = '';
           try { await inner; } catch (e: any) { message = e.message; }
           return [outer, message];"#)
    .await;
    assert_eq!(
        value(&r),
        json!([{ "x": 1 }, "binding arguments must be lossless JSON"])
    );
}

#[tokio::test]
async fn shared_references_are_copied_and_proto_keys_kept() {
    let r = run(
        r#"const shared = { v: 1 }; const o = JSON.parse('{"__proto__": {"x": 1}}');
           let reads = 0; const g = { get once() { reads++; return reads; } };
           return [shared, shared, o, g, Object.create(null)];"#,
    )
    .await;
    assert_eq!(
        value(&r),
        json!([{"v": 1}, {"v": 1}, {"__proto__": {"x": 1}}, {"once": 1}, {}])
    );
}

#[tokio::test]
async fn timers_are_driven_by_the_host() {
    let r = run(r#"
        const order: string[] = [];
        const t = setTimeout(() => order.push('cancelled'), 5);
        clearTimeout(t);
        await new Promise<void>(resolve => setTimeout(() => { order.push('b'); resolve(); }, 20));
        setTimeout((x: string) => order.push(x), 1, 'c');
        queueMicrotask(() => order.push('a'));
        await new Promise(r => setTimeout(r, 10));
        return order;
        "#)
    .await;
    assert_eq!(value(&r), json!(["b", "a", "c"]));
}

#[tokio::test]
async fn waiting_on_a_promise_that_can_never_settle_fails_at_once() {
    let r = run("await new Promise(() => {});\nreturn 1;").await;
    let message = failure(&r, FailureKind::Exception);
    assert!(message.contains("can never settle"), "{message}");
}

#[tokio::test]
async fn calls_start_when_made_so_promise_all_overlaps() {
    let rt = runtime();
    let ns = tools(vec![("sleep", slow(100, json!("z")))]);
    let r = run_on(
        &rt,
        "return await Promise.all(Array.from({ length: 10 }, () => tools.sleep({ ms: 100 })));",
        vec![ns],
        None,
    )
    .await;
    assert_eq!(value(&r), serde_json::Value::Array(vec![json!("z"); 10]));
    assert_eq!(r.calls.len(), 10);
}

#[tokio::test]
async fn prototype_named_bindings_are_ordinary_functions() {
    let ns = tools(vec![
        ("__proto__", echo()),
        ("constructor", echo()),
        ("with-dash", echo()),
    ]);
    let r = run_on(
        &runtime(),
        r#"
        return [
          await tools.__proto__({ a: 1 }),
          await tools.constructor({ b: 2 }),
          await tools['with-dash']({ c: 3 }),
          typeof tools.hasOwnProperty,
          Object.getPrototypeOf(tools) === null,
          Object.isFrozen(tools),
        ];
        "#,
        vec![ns],
        None,
    )
    .await;
    assert_eq!(
        value(&r),
        json!([{"a": 1}, {"b": 2}, {"c": 3}, "undefined", true, true])
    );
}

#[tokio::test]
async fn no_state_survives_between_runs() {
    let rt = runtime();
    let first = run_on(
        &rt,
        "globalThis.leak = 42; (Object.prototype as any).polluted = 1; return 1;",
        vec![],
        None,
    )
    .await;
    assert_eq!(value(&first), json!(1));
    let second = run_on(
        &rt,
        "return [typeof (globalThis as any).leak, typeof ({} as any).polluted];",
        vec![],
        None,
    )
    .await;
    assert_eq!(value(&second), json!(["undefined", "undefined"]));
}

#[tokio::test]
async fn misuse_is_rejected_not_resolved() {
    let rt = runtime();
    for global in ["not valid!", "await", "$tools", "a$b", "lambda", "console"] {
        let result = rt
            .run(RunRequest {
                program: "return 1".into(),
                bindings: vec![namespace(global, vec![], None)],
                signal: None,
                ..Default::default()
            })
            .await;
        assert!(
            matches!(result, Err(RunRejection::InvalidBindings(_))),
            "{global}"
        );
    }
    let dup = rt
        .run(RunRequest {
            program: "return 1".into(),
            bindings: vec![
                namespace("tools", vec![], None),
                namespace("tools", vec![], None),
            ],
            signal: None,
            ..Default::default()
        })
        .await;
    assert_eq!(
        dup.unwrap_err().to_string(),
        "codemode: duplicate binding global \"tools\""
    );
}

#[tokio::test]
async fn dispose_aborts_in_flight_runs_waits_and_refuses_later_runs() {
    let rt = runtime();
    let started = Arc::new(AtomicUsize::new(0));
    let s = started.clone();
    let ns = tools(vec![(
        "wait",
        codemode_runtime::code::binding(move |_, signal| {
            s.fetch_add(1, Ordering::SeqCst);
            async move {
                signal.aborted().await;
                Ok(json!("stopped"))
            }
        }),
    )]);
    let handle = {
        let rt = rt.clone();
        tokio::spawn(
            async move { run_on(&rt, "await tools.wait({}); return 1;", vec![ns], None).await },
        )
    };
    while started.load(Ordering::SeqCst) == 0 {
        tokio::task::yield_now().await;
    }
    rt.dispose().await;
    assert_eq!(rt.live_runs(), 0);
    let r = handle.await.unwrap();
    assert_eq!(failure(&r, FailureKind::Abort), "runtime disposed");
    let later = rt
        .run(RunRequest {
            program: "return 1".into(),
            bindings: vec![],
            signal: None,
            ..Default::default()
        })
        .await;
    let rejection = later.unwrap_err();
    assert_eq!(rejection, RunRejection::Disposed);
    assert!(rejection.to_string().contains("after disposal"));
}

#[tokio::test]
async fn aborting_mid_run_reports_the_reason() {
    let rt = runtime();
    let controller = AbortController::new();
    let signal = controller.signal();
    let (slow_call, mut started) = announced(slow(60_000, json!(null)));
    let ns = tools(vec![("slow", slow_call)]);
    let handle = {
        let rt = rt.clone();
        tokio::spawn(async move {
            run_on(
                &rt,
                "await tools.slow({}); return 1;",
                vec![ns],
                Some(signal),
            )
            .await
        })
    };
    // Mid-run: the program is waiting on its call.
    started.wait().await;
    controller.abort("user-cancel");
    let r = tokio::time::timeout(std::time::Duration::from_secs(120), handle)
        .await
        .expect("the run waits for its started call, which finishes")
        .unwrap();
    assert_eq!(failure(&r, FailureKind::Abort), "user-cancel");
}

#[tokio::test]
async fn a_pre_aborted_signal_resolves_without_running() {
    let calls = Arc::new(AtomicUsize::new(0));
    let ns = tools(vec![("echo", counted(calls.clone()))]);
    let r = run_on(
        &runtime(),
        "await tools.echo({}); return 1;",
        vec![ns],
        Some(codemode_runtime::signal::AbortSignal::aborted_with(
            "too-late",
        )),
    )
    .await;
    assert_eq!(failure(&r, FailureKind::Abort), "too-late");
    assert_eq!(calls.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn deeply_nested_source_fails_cleanly_or_runs() {
    let program = format!("return {}1{};", "(".repeat(5_000), ")".repeat(5_000));
    let r = run(&program).await;
    match &r.error {
        None => assert_eq!(r.value, Some(json!(1))),
        Some(e) => assert!(
            matches!(e.kind, FailureKind::WorkerExit | FailureKind::Exception),
            "{e:?}"
        ),
    }
    // The host survives and the next run works.
    assert_eq!(value(&run("return 2;").await), json!(2));
}

#[tokio::test]
async fn a_due_timer_is_not_starved_by_instant_calls() {
    let r = run("let stop = false;\nsetTimeout(() => { stop = true; }, 1);\nwhile (!stop) await tools.echo({});\nreturn 'stopped';").await;
    assert_eq!(value(&r), json!("stopped"));
}

#[tokio::test]
async fn a_getter_calling_a_tool_during_a_snapshot_cannot_corrupt_it() {
    let r = run(
        "return { get a() { tools.echo({ nested: true }).catch(() => {}); return 2; }, b: [1] };",
    )
    .await;
    assert_eq!(value(&r), json!({"a": 2, "b": [1]}));
}

#[tokio::test]
async fn json_parse_returns_what_the_language_says() {
    let r = run(r#"
        const deep = '['.repeat(10000) + ']'.repeat(10000);
        let d = 0; let cur: any = JSON.parse(deep);
        while (Array.isArray(cur) && cur.length) { cur = cur[0]; d++; }
        const dup = JSON.parse('{"a": 1, "b": 2, "a": 3}');
        const proto = JSON.parse('{"__proto__": {"x": 1}}');
        return [
          JSON.parse(' {"k": [1, -2.5e3, 1E2, 0.1, true, false, null, "\\u00e9\\n\\"\\\\/"]} '),
          Object.is(JSON.parse('-0'), -0),
          JSON.parse('1e400') === Infinity,
          JSON.parse('"\\ud800"').charCodeAt(0),
          JSON.parse('"é☃😀"'),
          Object.keys(dup), dup.a,
          Object.getPrototypeOf(proto) === Object.prototype, Object.keys(proto),
          JSON.parse('[1, 2]', (k: string, v: any) => (typeof v === 'number' ? v * 10 : v)),
          JSON.parse({ toString() { return '[7]'; } } as any),
          d,
          typeof JSON.parse, JSON.parse.name, JSON.parse.length,
        ];
    "#)
    .await;
    assert!(r.error.is_none(), "{:?}", r.error);
    assert_eq!(
        value(&r),
        json!([
            { "k": [1, -2500, 100, 0.1, true, false, null, "é\n\"\\/"] },
            true,
            true,
            0xd800,
            "é☃😀",
            ["a", "b"], 3,
            true, ["__proto__"],
            [10, 20],
            [7],
            9999,
            "function", "parse", 2
        ])
    );
}

#[tokio::test]
async fn json_parse_refuses_what_is_not_json() {
    for text in [
        "",
        " ",
        "01",
        "1.",
        ".5",
        "+1",
        "1e",
        "-",
        "[1,]",
        "{\"a\":1,}",
        "{a:1}",
        "'x'",
        "\"\t\"",
        "\"\\x\"",
        "\"\\u12\"",
        "[1] x",
        "NaN",
        "undefined",
        "\u{feff}1",
        "[",
        "{\"a\"}",
    ] {
        let program = format!(
            "try {{ JSON.parse({}); return 'parsed'; }} catch (e: any) {{ return e.name; }}",
            serde_json::to_string(text).unwrap()
        );
        let r = run(&program).await;
        assert_eq!(value(&r), json!("SyntaxError"), "{text:?}");
    }
}

/// Generated JSON-ish texts (valid and not) parsed by the sandbox and by Node must give the same
/// values, the same `-0`s and the same refusals.
#[tokio::test]
async fn json_parse_agrees_with_node_on_generated_texts() {
    const ATOMS: &[&str] = &[
        "0",
        "-0",
        "1",
        "-1.5",
        "1e5",
        "1E-5",
        "2.5e+3",
        "01",
        "1.",
        ".5",
        "+1",
        "1e",
        "true",
        "false",
        "null",
        "tru",
        "\"a\"",
        "\"\\u0041\"",
        "\"\\ud83d\\ude00\"",
        "\"\\ud800\"",
        "\"\\x\"",
        "\"\t\"",
        "\"é\"",
        "[]",
        "{}",
        "[1,]",
        "{\"a\":1,}",
        "\"\\/\"",
        "-",
        "1e400",
        "123456789012345678901234567890",
        "0.1e1",
    ];
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move |n: usize| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (seed % n as u64) as usize
    };
    fn gen(depth: usize, next: &mut dyn FnMut(usize) -> usize) -> String {
        match if depth > 3 { 0 } else { next(10) } {
            0..=3 => ATOMS[next(ATOMS.len())].to_owned(),
            4..=6 => {
                let items: Vec<String> = (0..next(4)).map(|_| gen(depth + 1, next)).collect();
                format!("[{}]", items.join(","))
            }
            _ => {
                let keys = ["a", "b", "__proto__", "1"];
                let members: Vec<String> = (0..next(4))
                    .map(|_| format!("\"{}\":{}", keys[next(keys.len())], gen(depth + 1, next)))
                    .collect();
                format!("{{{}}}", members.join(","))
            }
        }
    }
    let cases: Vec<String> = (0..300)
        .map(|i| {
            let text = gen(0, &mut next);
            match i % 7 {
                0 => format!(" {text}\n"),
                1 => format!("{text} x"),
                _ => text,
            }
        })
        .collect();
    let classify = "cases.map((c) => { try { const v = JSON.parse(c); return ['ok', JSON.stringify(v), Object.is(v, -0)]; } catch (e) { return ['err', e.name]; } })";
    let cases_json = serde_json::to_string(&cases).unwrap();
    let r = run(&format!(
        "const cases: string[] = {cases_json}; return {classify};"
    ))
    .await;
    let ours = value(&r);
    let node = std::process::Command::new("node")
        .arg("-e")
        .arg(format!(
            "const cases = {cases_json}; process.stdout.write(JSON.stringify({classify}));"
        ))
        .output()
        .expect("node runs (the test command installs it for the toolchain tests)");
    let theirs: serde_json::Value = serde_json::from_slice(&node.stdout).expect("node's answer");
    let (ours, theirs) = (ours.as_array().unwrap(), theirs.as_array().unwrap());
    assert_eq!(ours.len(), cases.len());
    for ((case, a), b) in cases.iter().zip(ours).zip(theirs) {
        assert_eq!(a, b, "JSON.parse({case:?})");
    }
    let valid = ours.iter().filter(|v| v[0] == "ok").count();
    assert!(
        valid > 50 && valid < 250,
        "the cases mix valid and invalid texts ({valid} valid)"
    );
}

#[tokio::test]
async fn a_binding_started_before_a_busy_loop_makes_progress_during_it() {
    let finished_at = Arc::new(std::sync::Mutex::new(None));
    let stamp = finished_at.clone();
    let quick = codemode_runtime::code::binding(move |_, _| {
        let stamp = stamp.clone();
        async move {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            *stamp.lock().unwrap() = Some(std::time::SystemTime::now());
            Ok(json!("done"))
        }
    });
    let r = run_on(
        &runtime(),
        "const p = tools.quick({}); const t = Date.now(); while (Date.now() - t < 3000) {} const end = Date.now(); return [await p, end];",
        vec![tools(vec![("quick", quick)])],
        None,
    )
    .await;
    let result = value(&r);
    assert_eq!(result[0], json!("done"));
    let finished = finished_at.lock().unwrap().expect("the binding ran");
    let finished_ms = finished
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as f64;
    // Polled only at the next wait, the binding would not even start before the loop ends.
    assert!(
        finished_ms <= result[1].as_f64().unwrap(),
        "the call waited for the busy loop: it finished at {finished_ms}, the loop ended at {}",
        result[1]
    );
}

/// A run that waits a while gives its stack pages back to the kernel (the private memory of a
/// waiting instance, `codemode bench`'s `private_per_instance_mib`), and its frames afterwards,
/// a deep recursion and a nested parse, run on the pages that come back just the same.
#[cfg(target_os = "linux")]
#[tokio::test]
async fn a_waiting_run_gives_its_stack_back_and_goes_on() {
    let program = r#"
        const depth = (n) => (n === 0 ? 0 : 1 + depth(n - 1));
        const nested = (n) => JSON.parse('['.repeat(n) + ']'.repeat(n));
        const before = depth(500);
        await new Promise((resolve) => setTimeout(resolve, 200));
        const after = depth(500);
        await new Promise((resolve) => setTimeout(resolve, 200));
        const sorted = [3, 1, 2].sort((a, b) => [a].map((x) => x - b)[0]);
        return [before, after, JSON.stringify(nested(1000)).length, sorted];
    "#;
    let rt = runtime();
    let (result, metrics) = rt
        .run_measured(RunRequest {
            program: program.into(),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(value(&result), json!([500, 500, 2000, [1, 2, 3]]));
    // Once in each wait: both outlast the interval, and the guest ran between them.
    assert_eq!(metrics.stack_given_back, 2);

    // A run that never waits pays nothing for it.
    let (result, metrics) = rt
        .run_measured(RunRequest {
            program: "return 1".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(value(&result), json!(1));
    assert_eq!(metrics.stack_given_back, 0);
}
