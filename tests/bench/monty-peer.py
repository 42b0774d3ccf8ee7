"""pydantic-monty peer: the Python interpreter behind Pydantic's Code Mode, measured on the
workloads that have a Python translation, each run in a fresh session as codemode runs each
program in a fresh instance. Prints one JSON object with the keys every peer prints.

Usage: python3 tests/bench/monty-peer.py [--runs N]
"""

import json
import statistics
import sys
import time
from importlib import metadata
from pathlib import Path

import pydantic_monty

ROOT = Path(__file__).resolve().parents[2]
WORKLOADS = ROOT / "fixtures" / "workloads"
# The `check` calls.py returns and what loop.py evaluates to, the same as their JavaScript twins.
CALLS_EXPECTED = 609129731
LOOP_EXPECTED = 8999997
COMPUTE_EXPECTED = 899397


def parse_runs(argv):
    runs = 200
    args = iter(argv)
    for arg in args:
        value = next(args, "") if arg == "--runs" else ""
        if not value.isdigit() or int(value) < 1:
            sys.exit("usage: python3 tests/bench/monty-peer.py [--runs N]")
        runs = int(value)
    return runs


def fresh_run(pool, code, expected, check=lambda value: value):
    """One program in a fresh session, from checkout to its return: wall ms and its value."""
    started = time.perf_counter()
    with pool.checkout() as session:
        value = session.feed_run(code)
    elapsed = (time.perf_counter() - started) * 1000
    if check(value) != expected:
        raise SystemExit(f"monty-peer: expected {expected}, got {value!r}")
    return elapsed, value


def echo(value):
    return value


def sub_call_us(pool, calls=1000):
    """Per-call cost of an external function: a loop of `calls` calls of `echo` in a fresh
    session, less the same loop without them (median of 5), as codemode measures its own."""
    with_calls = f"for i in range({calls}):\n    echo({{'i': i}})"
    baseline = f"for i in range({calls}):\n    {{'i': i}}"
    samples = []
    for _ in range(5):
        timings = []
        for code in (with_calls, baseline):
            started = time.perf_counter()
            with pool.checkout() as session:
                session.feed_run(code, external_lookup={"echo": echo})
            timings.append(time.perf_counter() - started)
        samples.append(max(timings[0] - timings[1], 0) / calls * 1e6)
    return statistics.median(samples)


def percentile(samples, p):
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round((len(ordered) - 1) * p))]


def main():
    runs = parse_runs(sys.argv[1:])
    calls = (WORKLOADS / "calls.py").read_text()
    loop = (WORKLOADS / "loop.py").read_text()
    compute = (WORKLOADS / "compute.py").read_text()
    with pydantic_monty.Monty() as pool:
        fresh_run(pool, "1 + 1", 2)
        trivial = [fresh_run(pool, "1 + 1", 2)[0] * 1000 for _ in range(runs)]
        sub_call = sub_call_us(pool)
        by_check = lambda value: value.get("check") if isinstance(value, dict) else None
        calls_runs = sorted(
            (fresh_run(pool, calls, CALLS_EXPECTED, by_check) for _ in range(3)),
            key=lambda run: run[0],
        )
        calls_ms, calls_value = calls_runs[1]
        loop_ms = statistics.median(fresh_run(pool, loop, LOOP_EXPECTED)[0] for _ in range(3))
        compute_ms = statistics.median(fresh_run(pool, compute, COMPUTE_EXPECTED)[0] for _ in range(5))
    version = metadata.version("pydantic-monty")
    report = {
        "peer": "pydantic-monty",
        "runs": runs,
        "fresh_run_p50_us": percentile(trivial, 0.5),
        "fresh_run_p99_us": percentile(trivial, 0.99),
        "fresh_run_program": "1 + 1",
        "sub_call_us": sub_call,
        "parallel_10x100ms_ms": None,
        "runs_per_sec": None,
        "rss_per_instance_mib": None,
        "kill_latency_ms": None,
        "compute_ms": compute_ms,
        "calls_ms": calls_ms,
        "calls": {
            "total_ms": calls_ms,
            "phases_ms": calls_value["phases"],
            "check": calls_value["check"],
        },
        "loop_ms": loop_ms,
        "data": None,
        "notes": f"pydantic-monty {version}: each program runs in a fresh session checked out of "
        "its pool of worker processes (the package's own way to run one program), so a fresh run "
        "includes the round trip to the worker, and a sub-call is an external function answered "
        "in this process. It runs Python, so it runs the Python "
        "translations of the compute and call-heavy workloads and the counting loop (`fixtures/workloads/*.py`); "
        "the other workloads are JavaScript-only or need host tools and are null.",
    }
    print(json.dumps(report))


if __name__ == "__main__":
    main()
