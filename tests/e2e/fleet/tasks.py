"""Drives `run_code` calls as tasks (the MCP tasks extension) across a fleet of stateless
`codemode mcp` replicas, speaking JSON-RPC over HTTP itself: the official Python client does not
implement the extension. Every request goes to the next replica in turn.

Usage: python3 tasks.py URLS_JSON

Prints one JSON object: for each scenario, what the replicas answered and which served each
request.
"""

import json
import sys
import time

import httpx2

VERSION = "2026-07-28"
TASKS = "io.modelcontextprotocol/tasks"


class Fleet:
    def __init__(self, urls):
        self.urls = urls
        self.next = 0
        self.ids = 0
        self.http = httpx2.Client(timeout=60)

    def request(self, method, params, name):
        """Sends one request to the next replica; returns (replica, result or error)."""
        replica = self.next
        self.next = (self.next + 1) % len(self.urls)
        self.ids += 1
        params = dict(params)
        params["_meta"] = {
            "io.modelcontextprotocol/protocolVersion": VERSION,
            "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}, "extensions": {TASKS: {}}},
            "io.modelcontextprotocol/clientInfo": {"name": "tasks-test", "version": "1"},
        }
        body = {"jsonrpc": "2.0", "id": self.ids, "method": method, "params": params}
        headers = {
            "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json",
            "MCP-Protocol-Version": VERSION,
            "Mcp-Method": method,
            "Mcp-Name": name,
        }
        response = self.http.post(self.urls[replica], json=body, headers=headers)
        return replica, answer_of(response, self.ids)


def answer_of(response, request_id):
    """The JSON-RPC answer to `request_id`, from a JSON body or an event stream."""
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        messages = [
            json.loads(line[len("data:"):])
            for line in response.text.splitlines()
            if line.startswith("data:") and line[len("data:"):].strip()
        ]
    else:
        messages = [response.json()]
    for message in messages:
        if message.get("id") == request_id:
            return message.get("result", {"error": message.get("error")})
    return {"error": f"no answer (HTTP {response.status_code}): {response.text[:300]}"}


def call(fleet, code):
    return fleet.request("tools/call", {"name": "run_code", "arguments": {"code": code, "description": "Task test"}}, "run_code")


def get(fleet, task_id):
    return fleet.request("tasks/get", {"taskId": task_id}, task_id)


def until(fleet, task_id, statuses, seconds=30):
    """Polls `tasks/get` (round robin) until the task's status is one of `statuses`."""
    seen = []
    deadline = time.monotonic() + seconds
    while True:
        replica, task = get(fleet, task_id)
        seen.append(replica)
        if task.get("status") in statuses or time.monotonic() > deadline:
            return task, seen
        time.sleep(0.2)


def main():
    fleet = Fleet(json.loads(sys.argv[1]))
    report = {}

    replica, quick = call(fleet, "return 1;")
    report["quick"] = {"answer": quick, "replica": replica}

    asked_on, created = call(fleet, "await new Promise((r) => setTimeout(r, 1200)); return 'late';")
    task, polled = until(fleet, created.get("taskId"), ("completed", "failed"))
    report["completed"] = {"created": created, "asked_on": asked_on, "task": task, "polled": polled}

    asked_on, created = call(fleet, "await new Promise((r) => setTimeout(r, 30000)); return 'never';")
    task_id = created.get("taskId")
    fleet.next = (asked_on + 1) % len(fleet.urls)
    cancelled_on, cancelled = fleet.request("tasks/cancel", {"taskId": task_id}, task_id)
    _, after = get(fleet, task_id)
    time.sleep(1.5)
    _, later = get(fleet, task_id)
    _, again = fleet.request("tasks/cancel", {"taskId": task_id}, task_id)
    report["cancelled"] = {
        "asked_on": asked_on, "cancelled_on": cancelled_on, "answer": cancelled,
        "after": after, "later": later, "again": again,
    }

    asked_on, created = call(fleet, "await new Promise((r) => setTimeout(r, 600)); return await tools.echo({ ask: 1 });")
    task_id = created.get("taskId")
    waiting, _ = until(fleet, task_id, ("input_required", "completed", "failed"))
    answers = {key: {"action": "accept", "content": {}} for key in (waiting.get("inputRequests") or {})}
    # The answer goes to another replica than the one that ran the task until it paused.
    fleet.next = (asked_on + 1) % len(fleet.urls)
    updated_on, updated = fleet.request("tasks/update", {"taskId": task_id, "inputResponses": answers}, task_id)
    task, _ = until(fleet, task_id, ("completed", "failed"))
    report["input"] = {"asked_on": asked_on, "waiting": waiting, "updated_on": updated_on, "updated": updated, "task": task}

    _, unknown = get(fleet, "0" * 32)
    report["unknown"] = unknown
    print(json.dumps(report))


main()
