//! The model-facing instruction texts that open the SDK text, one per language. They are prompt text, part of the cacheable prefix: change them deliberately.

/// Opens the TypeScript section; the declarations follow in a ```` ```ts ```` block.
pub const TYPESCRIPT_INSTRUCTIONS: &str = "## Writing code for run_code

Call `run_code` with two required arguments: `code`, the body of an async TypeScript function (top-level `await` and `return` work), and `description`, a short summary of what the program does. The program reaches the tools declared below through the global `tools` object.

- Call a tool as `await tools.name(args)`; a name that is not an identifier needs quoted access: `await tools[\"my-tool\"](args)`.
- A failed call throws a `ToolCallError`, whose `toolName` names the tool and whose `message` says why; use `try { … } catch (e) { if (e instanceof ToolCallError) … }` to recover from it.
- A call starts when it is made, not when it is awaited, so `await Promise.all([tools.a(x), tools.b(y)])` overlaps concurrency-safe tools; the others still run one at a time.
- End with `return value` or a bare last expression, and/or `console.log(...)`: only what you print or return is program output, so curate it; images from tool results are attached after the run.

The available tools:";

/// Opens the Python section; the declarations follow in a ```` ```python ```` block.
pub const PYTHON_INSTRUCTIONS: &str = "## Writing code for run_code

Call `run_code` with two required arguments: `code`, the body of an async Python function (top-level `await` and `return` work), and `description`, a short summary of what the program does. Only `tools` and `ToolCallError` are bound at run time: the classes below are type stubs (`FooArgs(field=1)` raises `NameError`), so pass plain dicts.

- Call a tool as `await tools.name(args)`; a name that is not an identifier, is a keyword or starts with `_` needs subscript access: `await tools[\"my-tool\"](args)`.
- A failed call raises a `ToolCallError`, whose `tool_name` names the tool; use `try: … except ToolCallError as e: …` to recover from it.
- Calls overlap only when awaited together: `await asyncio.gather(tools.a(x), tools.b(y))` runs concurrency-safe tools at the same time; the others still run one at a time.
- Use `print(...)` and/or a top-level `return <value>`: only what you print or return is program output, so curate it; images from tool results are attached after the run.

The available tools:";
