"""Drives `codemode mcp` with the official Python MCP client, for the end-to-end tests.

Usage: python3 drive.py PLAN_JSON (stdio|http) TARGET...

  stdio TARGET... is the server command line; http TARGET is the endpoint URL.

PLAN_JSON is {"elicit": ANSWER, "steps": [...]}, ANSWER being "accept" (with empty content),
"decline", "cancel", {"action": ..., "content": {...}} or null (no elicitation capability),
and each step one of
  {"op": "list"}
  {"op": "call", "tool": NAME, "args": {...}, "progress": bool, "cancel_on_progress": bool,
   "meta": {...}}
  {"op": "concurrent", "calls": [{"tool": NAME, "args": {...}}, ...]}
  {"op": "notifications"} (the methods of the server's notifications so far, progress aside)
  {"op": "wait_notification", "method": M, "within": S} (whether M came within S seconds)
  {"op": "elicitations"} (the messages of the elicitations the server sent so far)
A plan's "headers" (http only) go with every request. The answer, printed as one JSON line, is the list of step results. A call's result is
{"isError", "text", "structured", "images", "progress", "error"?}; a call that raised is
{"error": message}. A call with "cancel_on_progress" is cancelled when the server first reports
progress, that is once the call is certainly running (not after a guessed delay); its result
is {"cancelled": true, "progress": [...]}, or the call's own result if it ended first.
"""

import json
import os
import sys

import anyio
import httpx2
import mcp_types as types
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client


def result_of(result, progress):
    texts = [c.text for c in result.content if getattr(c, "type", None) == "text"]
    images = [c.mime_type for c in result.content if getattr(c, "type", None) == "image"]
    return {
        "isError": bool(result.is_error),
        "text": "\n".join(texts),
        "structured": result.structured_content,
        "images": images,
        "progress": progress,
    }


async def call(session, step):
    progress = []
    cancel_on_progress = step.get("cancel_on_progress", False)
    scope = anyio.CancelScope()

    async def on_progress(value, total, message):
        progress.append([value, message])
        if cancel_on_progress:
            scope.cancel()

    async def attempt():
        result = await session.call_tool(
            step["tool"],
            step.get("args", {}),
            progress_callback=(
                on_progress if step.get("progress") or cancel_on_progress else None
            ),
            meta=step.get("meta"),
        )
        return result_of(result, progress)

    try:
        if cancel_on_progress:
            with scope:
                return await attempt()
            return {"cancelled": True, "progress": progress}
        return await attempt()
    except Exception as error:  # the answer is data, whatever went wrong
        return {"error": str(error)}


NOTIFICATIONS = []
ELICITATIONS = []


async def on_message(message):
    method = getattr(getattr(message, "root", message), "method", None)
    if method and method != "notifications/progress":
        NOTIFICATIONS.append(method)


async def run_steps(session, plan):
    answers = []
    for step in plan["steps"]:
        op = step["op"]
        if op == "list":
            listed = await session.list_tools()
            answers.append(
                [
                    {
                        "name": t.name,
                        "description": t.description or "",
                        "inputSchema": t.input_schema,
                    }
                    for t in listed.tools
                ]
            )
        elif op == "call":
            answers.append(await call(session, step))
        elif op == "notifications":
            answers.append(list(NOTIFICATIONS))
        elif op == "wait_notification":
            # Until the server has sent it (or the step's deadline passes).
            with anyio.move_on_after(step.get("within", 60)):
                while step["method"] not in NOTIFICATIONS:
                    await anyio.sleep(0.05)
            answers.append(step["method"] in NOTIFICATIONS)
        elif op == "elicitations":
            answers.append(list(ELICITATIONS))
        elif op == "concurrent":
            results = [None] * len(step["calls"])

            async def one(i, spec):
                results[i] = await call(session, spec)

            async with anyio.create_task_group() as group:
                for i, spec in enumerate(step["calls"]):
                    group.start_soon(one, i, spec)
            answers.append(results)
        else:
            answers.append({"error": f"unknown op {op}"})
    return answers


async def main():
    plan = json.loads(sys.argv[1])
    transport = sys.argv[2]
    target = sys.argv[3:]
    elicit = plan.get("elicit")

    async def on_elicit(context, params):
        ELICITATIONS.append(params.message)
        if isinstance(elicit, dict):
            return types.ElicitResult(action=elicit["action"], content=elicit.get("content"))
        return types.ElicitResult(action=elicit, content={} if elicit == "accept" else None)

    options = {"message_handler": on_message}
    if elicit:
        options["elicitation_callback"] = on_elicit
    if transport == "stdio":
        # The whole environment: the SDK otherwise passes only a few variables on.
        server = StdioServerParameters(command=target[0], args=target[1:], env=dict(os.environ))
        async with stdio_client(server) as (read, write):
            async with ClientSession(read, write, **options) as session:
                await session.initialize()
                answers = await run_steps(session, plan)
    else:
        client = httpx2.AsyncClient(headers=plan.get("headers", {}), timeout=60)
        async with client, streamable_http_client(target[0], http_client=client) as (read, write):
            async with ClientSession(read, write, **options) as session:
                await session.initialize()
                answers = await run_steps(session, plan)
    print(json.dumps(answers))


anyio.run(main)
