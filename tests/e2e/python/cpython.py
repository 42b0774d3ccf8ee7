"""Runs a corpus program under CPython as codemode runs it under Monty, for comparison.

The program is the body of an async function (top-level `await` works), given `tools` with
`echo` (returns its argument) and `fail` (raises `ToolCallError` with the argument's
`message`), and `ToolCallError` with `tool_name`. Prints one JSON object: the lines the
program printed, and the exception that escaped it, if any (its type, message and the line in
the program where it was raised).

Usage: python3 tests/e2e/python/cpython.py PROGRAM.py
"""

import ast
import asyncio
import contextlib
import io
import json
import sys
import traceback


class ToolCallError(Exception):
    def __init__(self, message, tool_name):
        super().__init__(message)
        self.tool_name = tool_name


class Tools:
    async def echo(self, args=None, **kwargs):
        return args if args is not None else (kwargs or {})

    async def fail(self, args=None, **kwargs):
        args = args if args is not None else kwargs
        raise ToolCallError(args.get("message", "failed"), "fail")

    def __getitem__(self, name):
        return getattr(self, name)


def main():
    path = sys.argv[1]
    source = open(path, encoding="utf-8").read()
    code = compile(source, "program.py", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    scope = {"tools": Tools(), "ToolCallError": ToolCallError, "__name__": "__main__"}
    out = io.StringIO()
    error = None
    with contextlib.redirect_stdout(out):
        try:
            result = eval(code, scope)
            if asyncio.iscoroutine(result):
                asyncio.run(result)
        except Exception as e:  # noqa: BLE001 - every escaping exception is reported
            frames = [f for f in traceback.extract_tb(e.__traceback__) if f.filename == "program.py"]
            line = frames[-1].lineno if frames else getattr(e, "lineno", None)
            error = {"type": type(e).__name__, "message": str(e), "line": line}
    logs = out.getvalue().split("\n")
    if logs and logs[-1] == "":
        logs.pop()
    print(json.dumps({"logs": logs, "error": error}))


if __name__ == "__main__":
    main()
