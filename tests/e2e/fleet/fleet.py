"""Drives a fleet of stateless `codemode mcp` replicas with the official Python MCP client
(protocol 2026-07-28), for the end-to-end tests.

Usage: python3 fleet.py REPLICAS_JSON

REPLICAS_JSON is [{"url": "http://127.0.0.1:PORT/mcp", "pid": PID}, ...]. Every HTTP request
goes to the next replica in turn, as a load balancer without affinity would send it; a replica
that refuses the connection is passed over. The scenarios below run in order and their
answers are printed as one JSON object. Each answer lists the replicas that served the call's
`tools/call` requests (its question and its retry), by index.
"""

import json
import os
import signal
import sys

import anyio
import httpx2
import mcp_types as types
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

PROGRAM_APPROVED = "const v = await tools.echo({ ship: true }); return v;"
PROGRAM_DENIED = (
    "try { await tools.echo({ ship: false }); return 'made'; }"
    " catch (e) { return `${e.name}: ${e.message}`; }"
)
PROGRAM_REPLY = (
    "console.log('asking'); const plan = await tools.read_file({ path: 'plan.md' });"
    " return { plan, shouted: plan.toUpperCase() };"
)


class RoundRobin(httpx2.AsyncBaseTransport):
    """Sends each request to the next live replica, and notes which one took each call."""

    def __init__(self, replicas):
        self.replicas = replicas
        self.next = 0
        self.inner = httpx2.AsyncHTTPTransport()
        self.calls = []

    async def handle_async_request(self, request):
        for _ in range(len(self.replicas)):
            index = self.next
            self.next = (self.next + 1) % len(self.replicas)
            target = httpx2.URL(self.replicas[index]["url"])
            request.url = request.url.copy_with(host=target.host, port=target.port)
            request.headers["host"] = f"{target.host}:{target.port}"
            try:
                response = await self.inner.handle_async_request(request)
            except httpx2.ConnectError:
                continue
            if request.headers.get("mcp-method") == "tools/call":
                self.calls.append(index)
            return response
        raise httpx2.ConnectError("no replica is up")

    async def aclose(self):
        await self.inner.aclose()


class Answers:
    """What the person answers, question by question; may kill the replica that asked."""

    def __init__(self, transport):
        self.transport = transport
        self.script = []
        self.asked = []

    async def __call__(self, context, params):
        self.asked.append(params.message)
        answer = self.script.pop(0)
        if answer.get("kill_asker"):
            asker = self.transport.calls[-1]
            os.kill(self.transport.replicas[asker]["pid"], signal.SIGKILL)
            self.transport.replicas[asker]["killed"] = True
        return types.ElicitResult(action=answer["action"], content=answer.get("content"))


def outcome(result):
    texts = [c.text for c in result.content if getattr(c, "type", None) == "text"]
    return {
        "isError": bool(result.is_error),
        "text": "\n".join(texts),
        "structured": result.structured_content,
    }


async def call(client, transport, answers, program, script):
    answers.script = list(script)
    answers.asked = []
    first = len(transport.calls)
    try:
        result = outcome(await client.call_tool("run_code", {"code": program, "description": "fleet test"}))
    except Exception as error:  # the answer is data, whatever went wrong
        result = {"error": str(error)}
    result["replicas"] = transport.calls[first:]
    result["asked"] = answers.asked
    return result


async def replayed(client, program):
    """A question answered once, then the same answer sent again, and a forged state."""
    session = client.session
    args = {"code": program, "description": "fleet test"}
    question = await session.call_tool("run_code", args, allow_input_required=True)
    state = question.request_state
    keys = sorted((question.input_requests or {}).keys())
    responses = {key: {"action": "accept", "content": {}} for key in keys}
    answers = {"keys": keys}
    for name, sent in [("first", state), ("again", state), ("forged", state[:-4] + "0000")]:
        try:
            result = await session.call_tool("run_code", args, input_responses=responses, request_state=sent)
            answers[name] = outcome(result)
        except Exception as error:
            answers[name] = {"error": str(error)}
    return answers


async def main():
    replicas = json.loads(sys.argv[1])
    transport = RoundRobin(replicas)
    answers = Answers(transport)
    http = httpx2.AsyncClient(transport=transport, timeout=60)
    report = {}
    async with http:
        server = streamable_http_client(replicas[0]["url"], http_client=http)
        async with Client(server, mode="2026-07-28", elicitation_callback=answers) as client:
            report["approved"] = await call(client, transport, answers, PROGRAM_APPROVED, [{"action": "accept", "content": {}}])
            report["declined"] = await call(client, transport, answers, PROGRAM_DENIED, [{"action": "decline"}])
            report["reply"] = await call(
                client, transport, answers, PROGRAM_REPLY,
                [{"action": "accept", "content": {"reply": json.dumps("the plan")}}],
            )
            report["replayed"] = await replayed(client, PROGRAM_APPROVED)
            report["killed"] = await call(
                client, transport, answers, PROGRAM_APPROVED,
                [{"action": "accept", "content": {}, "kill_asker": True}],
            )
            report["after"] = await call(client, transport, answers, "return 'still serving';", [])
    report["killed_replicas"] = [i for i, r in enumerate(replicas) if r.get("killed")]
    print(json.dumps(report))


anyio.run(main)
