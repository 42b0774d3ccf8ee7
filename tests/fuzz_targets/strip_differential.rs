//! Target `strip_differential`: the eraser against swc's own stripper (strip-only mode), on
//! TypeScript that the fuzzer mutates (an input whose first byte is even: the rest is the
//! program) or that it assembles from pieces of TypeScript (odd: each following byte picks a
//! piece, so every input is a program of the constructs the eraser handles).
//!
//! Where both accept a program they must write the same JavaScript (whitespace aside). Where
//! one refuses, the other must too, but for the refusals codemode makes on purpose: a name
//! declared twice at the top of the program (Node's SyntaxError, which swc's stripper leaves to
//! the engine), `global { … }` without `declare` and `export as namespace` in a program, which
//! swc's stripper erases code and all, and a program that closes the function it is wrapped in.
//! A program refused by a bound on the parser's work (`scan.rs`) is not compared: the
//! reference would spend what the bound saves.

use codemode_host::strip::reference::{normalized, reference};
use codemode_host::strip::strip_types;

/// Pieces of TypeScript a generated program is made of: statements of every kind the eraser
/// erases or keeps, and the joints between them (a line break changes where semicolons go).
const PIECES: &[&str] = &[
    "let a: number = 1;",
    "const b = <T,>(x: T): T => x;",
    "function f<T extends object>(this: unknown, x?: T, ...r: number[]): x is T { return true }",
    "interface I<T> extends J { m(): void; [k: string]: T }",
    "type U<T> = T extends string ? 'a' : never;",
    "class C<T> implements I<T> { private readonly x: number = 1; declare y: string; static z?: T; m!: () => void }",
    "abstract class A { abstract m(): void; protected n(): number { return 1 } }",
    "let c = x as unknown as string;",
    "let d = y!;",
    "let e = z satisfies Z;",
    "declare const g: number;",
    "declare function h(): void;",
    "declare namespace N { let x: number }",
    "declare global { interface W { x: 1 } }",
    "declare module 'm' { }",
    "namespace M { }",
    "namespace Q { export type T = 1 }",
    "enum E { A }",
    "const enum F { B }",
    "let u = <number>v;",
    "function o(x: number): void; function o(x: any) {}",
    "class L { m(): void; m() {} }",
    "let v = a?.b!.c;",
    "let w = new Map<string, number>();",
    "f<string>('x');",
    "let q = `${x as string}`;",
    "x = a < b > (c);",
    "let t: [a: number, b?: string] = [1];",
    "let o2 = { m<T>(x: T): T { return x } };",
    "for (const k of [] as number[]) {}",
    "class K { constructor(private p = 1) {} }",
    "class P { accessor q: number = 1 }",
    "let fn = function <T>(this: Window, x: T) { return x };",
    "let gen = async function* <T>() {};",
    "if (a) { let i: I = {} as I }",
    "label: for (;;) { break label }",
    "export {};",
    "import type { T } from 'x';",
    "let n: typeof a = a;",
    "let k: keyof typeof o = 'm';",
    "let s: unique symbol;",
    "let z2 = (a as any)!;",
    "let arrow = (x: number): x is 1 => x === 1;",
    "let y2 = a! as B;",
    "return x as number;",
    "declare",
    "namespace",
    "global { }",
    "abstract",
    "type",
    "interface",
    "<T>",
    ": string",
    "as const",
    "?",
    "!",
    "(",
    ")",
    "{",
    "}",
    "\n",
    "\n",
    " ",
    ";",
    "// c\n",
    "/* c */",
];

/// The program an input stands for.
pub fn differential_program(data: &[u8]) -> String {
    match data.split_first() {
        Some((mode, rest)) if mode % 2 == 1 => rest
            .iter()
            .map(|&b| PIECES[usize::from(b) % PIECES.len()])
            .collect::<Vec<_>>()
            .join(""),
        Some((_, rest)) => String::from_utf8_lossy(rest).into_owned(),
        None => String::new(),
    }
}

/// Whether `message` is one of the refusals codemode makes where swc's stripper erases: the
/// early errors and constructs above, and a `}` that closes the function the program is
/// wrapped in (swc's stripper strips the wrapped text, whatever it is).
fn deliberate(message: &str) -> bool {
    message.contains("has already been declared")
        || message.contains("`global")
        || message.contains("export as namespace")
        || message.contains("the function it is wrapped in")
        || message.contains("does not parse as a function body")
}

/// Whether `message` is a bound the eraser puts on the parser's work before it parses (a
/// name used as a label inside itself, `<T>` tries in one statement, size, nesting): the
/// reference, which has none, is not asked, since it would spend the time the bound saves.
fn bounded(message: &str) -> bool {
    message.contains("repeats a label")
        || message.contains("type assertions or generic arrow functions")
        || message.contains("around brackets nested")
        || message.contains("tries deep")
        || message.contains("the limit is")
}

/// Deeper than this, the comparison is skipped: swc's stripper parses on the calling thread and
/// would overflow its stack; how deep programs fare is the `strip` target's business.
const MAX_NESTING: usize = 256;

/// How deep the brackets of `program` nest, at most.
fn nesting(program: &str) -> usize {
    let (mut depth, mut deepest) = (0usize, 0usize);
    for c in program.chars() {
        match c {
            '(' | '[' | '{' | '<' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            ')' | ']' | '}' | '>' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

pub fn strip_differential(data: &[u8]) {
    let program = differential_program(data);
    if nesting(&program) > MAX_NESTING {
        return;
    }
    let ours = strip_types(&program);
    if ours
        .as_ref()
        .is_err_and(|refused| bounded(&refused.message))
    {
        return;
    }
    // swc's stripper may panic on what the fuzzer writes; that is its failure, not the eraser's.
    let Ok(theirs) = std::panic::catch_unwind(|| reference(&program)) else {
        return;
    };
    match (&ours, &theirs) {
        (Ok(ours), Some(theirs)) => assert_eq!(
            normalized(ours),
            normalized(theirs),
            "the erasures differ:\n{program}"
        ),
        (Err(_), None) => {}
        (Err(refused), Some(_)) => assert!(
            deliberate(&refused.message),
            "the eraser refuses what swc's stripper erases ({}):\n{program}",
            refused.message
        ),
        (Ok(ours), None) => {
            panic!("swc's stripper refuses what the eraser erases:\n{program}\n---\n{ours}")
        }
    }
}
