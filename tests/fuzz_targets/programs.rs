//! Target `programs`: whole runs of generated JavaScript on the real guest.
//!
//! The input picks statements and expressions from a grammar of what hostile and careless
//! programs do: loops with and without end, deep recursion, huge strings, promise, timer and
//! log storms, throwing getters, proxies, `toJSON`, cycles, escapes through constructors, tool
//! calls awaited, raced, abandoned and failing.

use std::sync::OnceLock;

use arbitrary::{Result, Unstructured};
use codemode_host::WasmCodeRuntime;

use super::{fuzz_budgets, Checked};

/// How deep statements and expressions nest: enough for every shape, small enough that a
/// program stays a few hundred bytes.
const MAX_DEPTH: u32 = 3;

struct Gen<'a, 'b> {
    u: &'b mut Unstructured<'a>,
    vars: u32,
}

impl Gen<'_, '_> {
    fn pick<T: Copy>(&mut self, items: &[T]) -> Result<T> {
        self.u.choose(items).copied()
    }

    fn small(&mut self) -> Result<u32> {
        self.u.int_in_range(0..=20)
    }

    fn big(&mut self) -> Result<u64> {
        self.pick(&[1_000, 100_000, 10_000_000, 1 << 28, 1 << 40])
    }

    fn var(&mut self) -> Result<String> {
        if self.vars == 0 {
            return Ok("undefined".into());
        }
        Ok(format!("v{}", self.u.int_in_range(0..=self.vars - 1)?))
    }

    /// A new variable, readable by every later expression.
    fn fresh(&mut self) -> String {
        self.vars += 1;
        format!("v{}", self.vars - 1)
    }

    fn string(&mut self) -> Result<String> {
        Ok(self
            .pick(&[
                "\"\"",
                "\"abc\"",
                "\"\\u0000\\u001b[31m\"",
                "\"\\ud800\"",
                "\"😀\"",
                "\"{\\\"a\\\":1}\"",
                "\"[1,2\"",
                "\"__proto__\"",
                "`t${1+1}`",
            ])?
            .to_owned())
    }

    fn expr(&mut self, depth: u32) -> Result<String> {
        let leaf = depth >= MAX_DEPTH;
        let choice = if leaf {
            self.u.int_in_range(0..=5u8)?
        } else {
            self.u.int_in_range(0..=32u8)?
        };
        Ok(match choice {
            0 => self
                .pick(&["0", "-0", "1.5", "NaN", "Infinity", "2**53+1", "1e308*10"])?
                .to_owned(),
            1 => self.string()?,
            2 => self.var()?,
            3 => self
                .pick(&["null", "undefined", "true", "1n", "Symbol('s')", "[]", "{}"])?
                .to_owned(),
            4 => format!("{}", self.small()?),
            5 => self
                .pick(&[
                    "new Date(0)",
                    "new Map([[1,2]])",
                    "/a+/g",
                    "() => 1",
                    "new Error('e')",
                ])?
                .to_owned(),
            6 => format!("[{}, {}]", self.expr(depth + 1)?, self.expr(depth + 1)?),
            7 => format!(
                "{{ a: {}, b: {} }}",
                self.expr(depth + 1)?,
                self.expr(depth + 1)?
            ),
            8 => format!("await tools.echo({})", self.expr(depth + 1)?),
            9 => format!("await tools.sleep({})", self.expr(depth + 1)?),
            10 => format!("await tools.fail({})", self.expr(depth + 1)?),
            11 => format!("await other.echo({})", self.expr(depth + 1)?),
            12 => format!("tools.echo({})", self.expr(depth + 1)?),
            13 => format!(
                "await Promise.all([tools.sleep(1), tools.echo({}), tools.fail()])",
                self.expr(depth + 1)?
            ),
            14 => format!(
                "await Promise.race([tools.sleep({}), new Promise(r => setTimeout(r, {}))])",
                self.expr(depth + 1)?,
                self.small()?
            ),
            15 => format!("JSON.stringify({})", self.expr(depth + 1)?),
            16 => format!("JSON.parse({})", self.string()?),
            17 => format!("'x'.repeat({})", self.big()?),
            18 => format!("new Array({}).fill({})", self.big()?, self.expr(depth + 1)?),
            19 => format!("{{ toJSON() {{ return {}; }} }}", self.expr(depth + 1)?),
            20 => "{ get a() { throw new Error('getter'); } }".into(),
            21 => {
                "new Proxy({}, { get() { throw new Error('trap'); }, ownKeys() { return ['x']; } })"
                    .into()
            }
            22 => "(() => { const o = {}; o.self = o; return o; })()".into(),
            23 => "(function () { return this; })()".into(),
            24 => "(() => {}).constructor('return globalThis')()".into(),
            25 => "Object.getPrototypeOf(tools).constructor".into(),
            26 => "tools.echo.constructor('return 1')()".into(),
            27 => format!("/(a+)+$/.test('a'.repeat({}) + 'b')", self.small()? + 10),
            28 => format!("{}?.a?.b", self.expr(depth + 1)?),
            29 => format!("({} + {})", self.expr(depth + 1)?, self.expr(depth + 1)?),
            30 => "new ToolCallError('forged')".into(),
            31 => format!(
                "structuredClone === undefined ? {} : 0",
                self.expr(depth + 1)?
            ),
            _ => format!("typeof {}", self.expr(depth + 1)?),
        })
    }

    fn block(&mut self, depth: u32) -> Result<String> {
        let n = self.u.int_in_range(0..=4)?;
        let mut out = String::new();
        for _ in 0..n {
            out.push_str(&self.stmt(depth)?);
            out.push('\n');
        }
        Ok(out)
    }

    fn stmt(&mut self, depth: u32) -> Result<String> {
        let leaf = depth >= MAX_DEPTH;
        let choice = if leaf {
            self.u.int_in_range(0..=4u8)?
        } else {
            self.u.int_in_range(0..=20u8)?
        };
        Ok(match choice {
            0 => {
                let e = self.expr(depth + 1)?;
                let name = self.fresh();
                format!("let {name} = {e};")
            }
            1 => format!("console.log({});", self.expr(depth + 1)?),
            2 => format!("return {};", self.expr(depth + 1)?),
            3 => format!("throw {};", self.expr(depth + 1)?),
            4 => format!("({});", self.expr(depth + 1)?),
            5 => format!(
                "for (let i = 0; i < {}; i++) {{\n{}}}",
                self.small()?,
                self.block(depth + 1)?
            ),
            6 => "while (true) {}".into(),
            7 => format!(
                "try {{\n{}}} catch (e) {{ console.log(String(e), e instanceof ToolCallError && e.toolName); }}",
                self.block(depth + 1)?
            ),
            8 => format!("setTimeout(() => {{\n{}}}, {});", self.block(depth + 1)?, self.small()?),
            9 => "function f(n) { return f(n + 1) + 1; } f(0);".into(),
            10 => format!(
                "for (let i = 0; i < {}; i++) console.log('log', i);",
                self.big()?
            ),
            11 => format!(
                "for (let i = 0; i < {}; i++) tools.sleep(i);",
                self.pick(&[10u32, 300, 5000])?
            ),
            12 => format!(
                "for (let i = 0; i < {}; i++) setTimeout(() => {{}}, 1);",
                self.pick(&[10u32, 5000, 100000])?
            ),
            13 => "await new Promise(() => {});".into(),
            14 => "globalThis.Promise = function () {}; Object.prototype.then = 1;".into(),
            15 => "Object.defineProperty(Array.prototype, 'toJSON', { value() { throw 1; } });"
                .into(),
            16 => format!(
                "for await (const x of [tools.echo(1), tools.fail()]) console.log(x);\n{}",
                self.block(depth + 1)?
            ),
            17 => format!("if ({}) {{\n{}}}", self.expr(depth + 1)?, self.block(depth + 1)?),
            18 => {
                let body = self.block(depth + 1)?;
                let name = self.fresh();
                format!("const {name} = (async () => {{\n{body}}})(); {name}.catch(() => {{}});")
            }
            19 => {
                let name = self.fresh();
                format!("let {name} = 'a'; for (;;) {name} += {name};")
            }
            _ => format!("console.error({});", self.expr(depth + 1)?),
        })
    }
}

/// The program the input describes.
pub fn program_text(data: &[u8]) -> Result<String> {
    let mut u = Unstructured::new(data);
    let mut g = Gen { u: &mut u, vars: 0 };
    g.block(0)
}

fn runtime() -> &'static WasmCodeRuntime {
    static RT: OnceLock<WasmCodeRuntime> = OnceLock::new();
    RT.get_or_init(|| WasmCodeRuntime::new(fuzz_budgets()).expect("the real guest loads"))
}

/// Runs the program the input describes on the real guest.
pub fn programs(data: &[u8]) {
    let Ok(program) = program_text(data) else {
        return;
    };
    Checked::new().run(runtime(), &program);
}
