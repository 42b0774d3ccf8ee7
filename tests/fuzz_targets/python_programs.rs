//! Target `python_programs`: whole runs of generated Python on the real Python guest (Monty).
//!
//! The input picks statements and expressions from a grammar of what hostile and careless
//! Python programs do: loops with and without end, deep recursion, huge integers and strings,
//! print storms, values JSON cannot carry, tool calls awaited, gathered, abandoned and failing,
//! sleeps, imports of what is not there, and the names of what the sandbox does not have. The
//! properties are the JavaScript guest's ([`super::Checked`]): one typed outcome, output within
//! the cap, lossless arguments to every binding, no hang.

use std::sync::OnceLock;

use arbitrary::{Result, Unstructured};
use codemode_host::WasmCodeRuntime;
use codemode_sdk_gen::Language;

use super::{fuzz_budgets, Checked};

/// How deep statements and expressions nest.
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

    fn var(&mut self) -> Result<String> {
        if self.vars == 0 {
            return Ok("None".into());
        }
        Ok(format!("v{}", self.u.int_in_range(0..=self.vars - 1)?))
    }

    fn fresh(&mut self) -> String {
        self.vars += 1;
        format!("v{}", self.vars - 1)
    }

    fn indent(block: &str) -> String {
        let mut out = String::new();
        for line in block.lines() {
            out.push_str("    ");
            out.push_str(line);
            out.push('\n');
        }
        if out.is_empty() {
            out.push_str("    pass\n");
        }
        out
    }

    fn expr(&mut self, depth: u32) -> Result<String> {
        let leaf = depth >= MAX_DEPTH;
        let choice = if leaf {
            self.u.int_in_range(0..=5u8)?
        } else {
            self.u.int_in_range(0..=30u8)?
        };
        Ok(match choice {
            0 => self
                .pick(&[
                    "0",
                    "-0.0",
                    "1.5",
                    "float('nan')",
                    "float('inf')",
                    "2**53+1",
                    "10**400",
                    "1e308*10",
                ])?
                .to_owned(),
            1 => self
                .pick(&[
                    "''",
                    "'abc'",
                    "'\\x00\\x1b[31m'",
                    "'\\ud800'",
                    "'😀'",
                    "'{\"a\": 1}'",
                    "b'x'",
                ])?
                .to_owned(),
            2 => self.var()?,
            3 => self
                .pick(&["None", "True", "[]", "{}", "()", "set()", "{1, 2}"])?
                .to_owned(),
            4 => format!("{}", self.small()?),
            5 => self
                .pick(&[
                    "len",
                    "print",
                    "tools",
                    "ToolCallError",
                    "Exception",
                    "range(3)",
                ])?
                .to_owned(),
            6 => format!("[{}, {}]", self.expr(depth + 1)?, self.expr(depth + 1)?),
            7 => format!(
                "{{'a': {}, 'b': {}}}",
                self.expr(depth + 1)?,
                self.expr(depth + 1)?
            ),
            8 => format!("await tools.echo({})", self.expr(depth + 1)?),
            9 => format!("await tools.sleep({})", self.expr(depth + 1)?),
            10 => format!("await tools.fail({})", self.expr(depth + 1)?),
            11 => format!("await other.echo({})", self.expr(depth + 1)?),
            12 => format!("tools.echo({})", self.expr(depth + 1)?),
            13 => format!(
                "await asyncio.gather(tools.sleep({{}}), tools.echo({}), tools.fail({{}}))",
                self.expr(depth + 1)?
            ),
            14 => format!("await tools['echo'](x={}, y=1)", self.expr(depth + 1)?),
            15 => format!("json.dumps({})", self.expr(depth + 1)?),
            16 => "json.loads('[1, 2')".into(),
            17 => format!(
                "'x' * {}",
                self.pick(&[1_000u64, 100_000, 10_000_000, 1 << 31])?
            ),
            18 => format!("[0] * {}", self.pick(&[1_000u64, 1_000_000, 1 << 30])?),
            19 => format!("str({})", self.expr(depth + 1)?),
            20 => format!("({} + {})", self.expr(depth + 1)?, self.expr(depth + 1)?),
            21 => format!("{}[{}]", self.expr(depth + 1)?, self.expr(depth + 1)?),
            22 => format!("{}.missing", self.expr(depth + 1)?),
            23 => "ToolCallError('forged')".into(),
            24 => format!("await tools.nope({})", self.expr(depth + 1)?),
            25 => format!("(lambda x: x)({})", self.expr(depth + 1)?),
            26 => format!("[x for x in range({})]", self.small()?),
            27 => format!("{{str(i): i for i in range({})}}", self.small()?),
            28 => "open('/etc/passwd').read()".into(),
            29 => format!(
                "await asyncio.sleep({})",
                self.pick(&["0", "0.001", "-1", "1e9"])?
            ),
            _ => format!("type({}).__name__", self.expr(depth + 1)?),
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
            self.u.int_in_range(0..=3u8)?
        } else {
            self.u.int_in_range(0..=16u8)?
        };
        Ok(match choice {
            0 => {
                let e = self.expr(depth + 1)?;
                let name = self.fresh();
                format!("{name} = {e}")
            }
            1 => format!("print({})", self.expr(depth + 1)?),
            2 => format!("raise ValueError({})", self.expr(depth + 1)?),
            3 => self.expr(depth + 1)?,
            4 => format!(
                "for i in range({}):\n{}",
                self.small()?,
                Self::indent(&self.block(depth + 1)?)
            ),
            5 => "while True:\n    pass".into(),
            6 => format!(
                "try:\n{}except ToolCallError as e:\n    print(e.tool_name, e)\nexcept Exception as e:\n    print(type(e).__name__)",
                Self::indent(&self.block(depth + 1)?)
            ),
            7 => "def f(n):\n    return f(n + 1) + 1\nf(0)".into(),
            8 => format!(
                "for i in range({}):\n    print('log', i)",
                self.pick(&[10u64, 1_000, 100_000])?
            ),
            9 => format!(
                "async def task():\n{}\nawait asyncio.gather(task(), task())",
                Self::indent(&self.block(depth + 1)?)
            ),
            10 => format!(
                "if {}:\n{}else:\n    pass",
                self.expr(depth + 1)?,
                Self::indent(&self.block(depth + 1)?)
            ),
            11 => "import os\nos.getenv('HOME')".into(),
            12 => "import socket".into(),
            13 => {
                let name = self.fresh();
                format!("{name} = 'a'\nwhile True:\n    {name} += {name}")
            }
            14 => "class C:\n    def __str__(self):\n        raise ValueError('no')\nprint(C())".into(),
            15 => format!("return {}", self.expr(depth + 1)?),
            _ => format!("print({}, end='')", self.expr(depth + 1)?),
        })
    }
}

/// The Python program the input describes (it imports what its statements may use).
pub fn python_program_text(data: &[u8]) -> Result<String> {
    let mut u = Unstructured::new(data);
    let mut g = Gen { u: &mut u, vars: 0 };
    Ok(format!("import asyncio\nimport json\n{}", g.block(0)?))
}

fn runtime() -> &'static WasmCodeRuntime {
    static RT: OnceLock<WasmCodeRuntime> = OnceLock::new();
    RT.get_or_init(|| {
        WasmCodeRuntime::for_language(Language::Python, fuzz_budgets())
            .expect("the real Python guest loads")
    })
}

/// Runs the Python program the input describes on the real Python guest.
pub fn python_programs(data: &[u8]) {
    let Ok(program) = python_program_text(data) else {
        return;
    };
    Checked::new().run(runtime(), &program);
}
