"""Measures `codemode mcp --http --stateless` as a fleet on loopback: trivial runs per second
through 1 and 3 replicas (every request to the next replica, as a load balancer without
affinity sends them), and what an approval's round trip through the state store adds to a call.

Usage: python3 tests/bench/fleet.py CODEMODE [--seconds S] [--clients N] [--json]

The client is the official Python MCP client (protocol 2026-07-28), so the figures include its
own cost per request; compare the two fleet sizes with each other, measured in the same run.
The replicas share one state directory and key (a fleet would share an S3 bucket instead).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import anyio
import httpx2
import mcp_types as types
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

KEY = "a key every replica of the benchmark fleet shares"


class RoundRobin(httpx2.AsyncBaseTransport):
    def __init__(self, urls):
        self.urls = [httpx2.URL(u) for u in urls]
        self.next = 0
        self.inner = httpx2.AsyncHTTPTransport(limits=httpx2.Limits(max_connections=64))

    async def handle_async_request(self, request):
        target = self.urls[self.next]
        self.next = (self.next + 1) % len(self.urls)
        request.url = request.url.copy_with(host=target.host, port=target.port)
        request.headers["host"] = f"{target.host}:{target.port}"
        return await self.inner.handle_async_request(request)

    async def aclose(self):
        await self.inner.aclose()


def start(codemode, count, state):
    """`count` replicas; returns their processes and URLs once each listens."""
    env = dict(os.environ, CODEMODE_STATE_KEY=KEY)
    replicas = []
    for _ in range(count):
        child = subprocess.Popen(
            [codemode, "mcp", "--http", "127.0.0.1:0", "--stateless", "--builtins",
             "--ask", "echo", "--state", state, "--max-sessions", "4096"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            env=env, text=True,
        )
        for line in child.stderr:
            if "http://" in line:
                replicas.append((child, line[line.index("http://"):].strip()))
                break
        else:
            sys.exit(f"a replica did not start: exit {child.wait()}")
    return replicas


async def ready(client):
    # The first run waits for the sandbox to be prepared (once per machine and version).
    await client.call_tool("run_code", {"code": "return 1", "description": "warm up"})


async def throughput(urls, seconds, clients):
    transport = RoundRobin(urls)
    async with httpx2.AsyncClient(transport=transport, timeout=60) as http:
        async with Client(streamable_http_client(urls[0], http_client=http), mode="2026-07-28") as client:
            for _ in range(len(urls)):
                await ready(client)
            done = 0
            deadline = time.perf_counter() + seconds

            async def worker():
                nonlocal done
                while time.perf_counter() < deadline:
                    result = await client.call_tool("run_code", {"code": "return 1", "description": "bench"})
                    assert not result.is_error, result
                    done += 1

            started = time.perf_counter()
            async with anyio.create_task_group() as group:
                for _ in range(clients):
                    group.start_soon(worker)
            return done / (time.perf_counter() - started)


async def round_trips(urls, calls):
    """Median ms of a call of `echo` under --ask (asked, answered, resumed on the next replica)
    and of a plain run, one at a time."""

    async def accept(context, params):
        return types.ElicitResult(action="accept", content={})

    transport = RoundRobin(urls)
    async with httpx2.AsyncClient(transport=transport, timeout=60) as http:
        server = streamable_http_client(urls[0], http_client=http)
        async with Client(server, mode="2026-07-28", elicitation_callback=accept) as client:
            await ready(client)
            timings = {"plain": [], "approved": []}
            programs = {
                "plain": "return { ship: true };",
                "approved": "return await tools.echo({ ship: true });",
            }
            for _ in range(calls):
                for kind, code in programs.items():
                    started = time.perf_counter()
                    result = await client.call_tool("run_code", {"code": code, "description": "bench"})
                    timings[kind].append((time.perf_counter() - started) * 1000)
                    assert result.structured_content["result"] == {"ship": True}, result
            return {kind: statistics.median(values) for kind, values in timings.items()}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("codemode")
    parser.add_argument("--seconds", type=float, default=5)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    report = {"clients": args.clients, "seconds": args.seconds}
    with tempfile.TemporaryDirectory() as scratch:
        state = os.path.join(scratch, "state")
        for count in (1, 3):
            replicas = start(args.codemode, count, state)
            try:
                urls = [url for _, url in replicas]
                report[f"runs_per_second_{count}"] = anyio.run(throughput, urls, args.seconds, args.clients)
                if count == 3:
                    report["round_trip_ms"] = anyio.run(round_trips, urls, args.calls)
            finally:
                for child, _ in replicas:
                    child.kill()
                    child.wait()
    if args.json:
        print(json.dumps(report))
        return
    trips = report["round_trip_ms"]
    print(f"trivial runs per second, {args.clients} concurrent calls: "
          f"1 replica {report['runs_per_second_1']:.0f}, 3 replicas {report['runs_per_second_3']:.0f} "
          f"({report['runs_per_second_3'] / report['runs_per_second_1']:.2f}x)")
    print(f"a call, median of {args.calls}: {trips['plain']:.1f} ms plain, {trips['approved']:.1f} ms with an "
          f"approval asked and answered through the store (+{trips['approved'] - trips['plain']:.1f} ms)")


if __name__ == "__main__":
    main()
