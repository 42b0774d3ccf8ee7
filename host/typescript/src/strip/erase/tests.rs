use super::Construct;
use crate::strip::{strip_types, StripError};

/// The erased text of `program` (a function body).
fn js(program: &str) -> String {
    strip_types(program).unwrap_or_else(|e| panic!("{program}: {e:?}"))
}

fn refused(program: &str) -> StripError {
    strip_types(program).expect_err(program)
}

#[test]
fn annotations_assertions_and_type_arguments_become_spaces() {
    assert_eq!(
        js("let x: number = f<string>(a!) as number;\nreturn x satisfies number;"),
        "let x         = f        (a )          ;\nreturn x                 ;"
    );
    assert_eq!(js("const g = f<string>;"), "const g = f        ;");
}

#[test]
fn declarations_of_types_vanish_and_keep_the_next_line_apart() {
    assert_eq!(
        js("let a = 1\ninterface I { x: number }\n(a)"),
        "let a = 1\n;                        \n(a)"
    );
    assert_eq!(
        js("let a = 1;\ntype T = string;\nreturn a"),
        "let a = 1;\n                \nreturn a"
    );
    assert_eq!(
        js("declare const c: number;\nfunction f(a: string): void;\nfunction f(a) {}"),
        ";                       \n                            \nfunction f(a) {}"
    );
}

#[test]
fn an_erased_statement_ends_the_directive_prologue() {
    assert_eq!(js("type T = 1\n'use strict'"), ";         \n'use strict'");
}

#[test]
fn an_assertion_before_a_line_starting_with_a_bracket_ends_its_statement() {
    assert_eq!(js("let y = x as T\n(y)"), "let y = x;    \n(y)");
    assert_eq!(js("let y = x as T\n+y"), "let y = x     \n+y");
}

#[test]
fn parameters_lose_types_markers_and_this() {
    assert_eq!(
        js("function f(this: W, a?: number, b?, [c]?: T) {}"),
        "function f(         a         , b , [c]    ) {}"
    );
    assert_eq!(js("let v!: number;"), "let v         ;");
}

#[test]
fn arrows_keep_their_parentheses_where_a_line_break_would_break_them() {
    assert_eq!(
        js("const f = (a): {\n  x: number\n} => ({ x: a })"),
        "const f = (a    \n           \n) => ({ x: a })"
    );
    assert_eq!(
        js("const g = async <T,>\n(a: T) => a"),
        "const g = async (   \n a   ) => a"
    );
    assert_eq!(
        js("const h = <T,>(a: T): T => a"),
        "const h =     (a   )    => a"
    );
}

#[test]
fn class_members_lose_what_javascript_does_not_have() {
    let ts = [
        "abstract class A<T> extends B<T> implements I, J {",
        "  private readonly x: number = 1;",
        "  declare y: string;",
        "  z?: number;",
        "  w!: number;",
        "  [key: string]: unknown;",
        "  abstract m(): void;",
        "  public static override n<U>(u: U): U { return u }",
        "  o?(): void {}",
        "}",
    ];
    let js_lines = [
        "         class A    extends B                    {",
        "                   x         = 1;",
        "                    ",
        "  z         ;",
        "  w         ;",
        "                         ",
        "                     ",
        "         static          n   (u   )    { return u }",
        "  o ()       {}",
        "}",
    ];
    assert_eq!(js(&ts.join("\n")), js_lines.join("\n"));
}

#[test]
fn class_members_that_could_join_the_previous_one_are_kept_apart() {
    assert_eq!(
        js("class A { x = 1\n public [k] = 2 }"),
        "class A { x = 1\n ;      [k] = 2 }"
    );
    assert_eq!(
        js("class A { get: number\n m() {} }"),
        "class A { get;       \n m() {} }"
    );
}

#[test]
fn a_wide_character_in_a_type_is_one_space() {
    assert_eq!(js("let a: \"😀\" = 1"), "let a      = 1");
}

#[test]
fn constructs_needing_generated_code_are_refused_where_they_start() {
    for (program, construct, line, column) in [
        ("let a = 1;\n  enum E { A }", Construct::Enum, 2, 3),
        (
            "namespace N { export const x = 1 }",
            Construct::Namespace,
            1,
            1,
        ),
        (
            "class C { constructor(private x: number) {} }",
            Construct::ParameterProperty,
            1,
            23,
        ),
        ("let a = <any>b;", Construct::AngleBracketAssertion, 1, 9),
        (
            "let a = -x as number ** 2;",
            Construct::UnaryBeforeExponent,
            1,
            9,
        ),
        (
            "let y = 1;\nglobal { y = 2 }",
            Construct::GlobalWithoutDeclare,
            2,
            1,
        ),
        (
            "namespace N {\n  namespace M { export as namespace M; }\n}",
            Construct::ExportAsNamespace,
            2,
            17,
        ),
    ] {
        let e = refused(program);
        assert_eq!(e.message, construct.message(), "{program}");
        assert_eq!((e.line, e.column), (line, column), "{program}");
    }
    assert!(
        strip_types("declare namespace D { const x: number }\ndeclare enum F { A }\nreturn 1")
            .is_ok()
    );
    assert!(strip_types("declare global { interface Window { x: number } }\nreturn 1").is_ok());
    assert!(strip_types("declare namespace D { export as namespace D; }\nreturn 1").is_ok());
}

use crate::strip::reference::{normalized, reference};

fn typescript_fixtures() -> Vec<(std::path::PathBuf, String)> {
    fn walk(dir: &std::path::Path, out: &mut Vec<(std::path::PathBuf, String)>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        let mut entries: Vec<_> = entries.flatten().map(|e| e.path()).collect();
        entries.sort();
        for path in entries {
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "ts") {
                if let Ok(text) = std::fs::read_to_string(&path) {
                    out.push((path, text));
                }
            }
        }
    }
    let root = crate::manifest_dir().join("../../fixtures");
    let mut out = Vec::new();
    walk(&root, &mut out);
    out
}

/// Whether `js` (a function body) parses as JavaScript.
fn parses_as_javascript(js: &str) -> bool {
    use swc_common::BytePos;
    use swc_ecma_parser::{EsSyntax, Parser, StringInput, Syntax};

    let wrapped = format!("async function f() {{\n{js}\n}}");
    let end = BytePos(1 + wrapped.len() as u32);
    let mut parser = Parser::new(
        Syntax::Es(EsSyntax::default()),
        StringInput::new(&wrapped, BytePos(1), end),
        None,
    );
    parser.parse_script().is_ok() && parser.take_errors().is_empty()
}

#[test]
fn erases_every_fixture_as_swcs_stripper_does_and_the_result_is_javascript() {
    on_a_big_stack(compare_with_the_reference);
}

/// Runs a comparison where the reference has room: it parses on the calling thread, and the
/// hostile fixtures nest deeply.
fn on_a_big_stack(comparison: fn()) {
    std::thread::Builder::new()
        .stack_size(1 << 30)
        .spawn(comparison)
        .expect("a thread for the comparison")
        .join()
        .expect("the comparison passes");
}

/// Cases the eraser refuses where the reference erases them, code and all: a program whose
/// code vanishes unseen is worse than one refused with the reason.
const REFUSED_WHERE_THE_REFERENCE_ERASES: [&str; 2] =
    ["refused-global.ts", "refused-export-as-namespace.ts"];

fn compare_with_the_reference() {
    let fixtures = typescript_fixtures();
    assert!(fixtures.len() > 200, "{} fixtures", fixtures.len());
    let mut erased = 0;
    // `fixtures/strip/` holds a case of every erasure; only those named `refused-…` fail.
    let strip_cases = crate::manifest_dir().join("../../fixtures/strip");
    let name_of = |path: &std::path::Path| {
        path.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    };
    for (path, program) in &fixtures {
        let ours = strip_types(program);
        let theirs = reference(program);
        match (&ours, &theirs) {
            (Ok(ours), Some(theirs)) => {
                assert!(!name_of(path).starts_with("refused-"), "{}", path.display());
                assert_eq!(
                    normalized(ours),
                    normalized(theirs),
                    "{}: the erasures differ",
                    path.display()
                );
                assert!(
                    parses_as_javascript(ours),
                    "{}: not JavaScript:\n{ours}",
                    path.display()
                );
                erased += 1;
            }
            (Err(_), None) => assert!(
                !path.starts_with(&strip_cases) || name_of(path).starts_with("refused-"),
                "{}: refused: {ours:?}",
                path.display()
            ),
            (Err(_), Some(_))
                if REFUSED_WHERE_THE_REFERENCE_ERASES.contains(&name_of(path).as_str()) => {}
            _ => panic!(
                "{}: one refuses, the other does not: {ours:?} / {theirs:?}",
                path.display()
            ),
        }
    }
    assert!(erased > 150, "{erased} erased");
}

/// Variants of the erasure cases: each with one line left out, and each with one line break
/// turned into a space. Many no longer parse, or parse as something else; wherever swc's
/// stripper accepts one, the eraser must write what it writes.
#[test]
fn every_variant_of_the_erasure_cases_erases_as_swcs_stripper_does() {
    on_a_big_stack(compare_variants);
}

fn compare_variants() {
    let cases = crate::manifest_dir().join("../../fixtures/strip");
    let mut compared = 0;
    for (path, program) in typescript_fixtures() {
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
        let deliberate =
            name.is_some_and(|n| REFUSED_WHERE_THE_REFERENCE_ERASES.contains(&n.as_str()));
        if !path.starts_with(&cases) || deliberate {
            continue;
        }
        let lines: Vec<&str> = program.split('\n').collect();
        let without = (0..lines.len()).map(|skip| {
            lines
                .iter()
                .enumerate()
                .filter(|&(i, _)| i != skip)
                .map(|(_, l)| *l)
                .collect::<Vec<_>>()
                .join("\n")
        });
        let joined = (1..lines.len())
            .map(|at| format!("{} {}", lines[..at].join("\n"), lines[at..].join("\n")));
        for variant in without.chain(joined) {
            let (ours, theirs) = (strip_types(&variant), reference(&variant));
            if let (Ok(ours), Some(theirs)) = (&ours, &theirs) {
                assert_eq!(
                    normalized(ours),
                    normalized(theirs),
                    "a variant of {}:\n{variant}",
                    path.display()
                );
                compared += 1;
            } else {
                assert_eq!(
                    ours.is_ok(),
                    theirs.is_some(),
                    "a variant of {}: one refuses, the other does not: {ours:?}\n{variant}",
                    path.display()
                );
            }
        }
    }
    assert!(compared > 100, "{compared} variants compared");
}
