"""Benchmark: Query round trip through HTTP -> Gateway -> Dora -> mock provider -> back.

Measured in one run beside its floors, each taken the same way:
  * HTTP floor: the Gateway's HTTP stack answering the Query route without Dora;
  * Dora floor: a 200-byte request/reply between two bare Dora Python nodes;
  * full path: ``dataflows/mock.yml``, the ``mock/echo`` Query with a 200-byte message.
Then throughput with 8 concurrent clients, and the Gateway's RSS across many Actions
(bounded retention must keep it flat). The last line printed is one JSON object.

    python bench/gateway_query.py [--requests 2000] [--actions 20000]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.support import (
    concurrent_throughput,
    find_node,
    run,
    sequential_latencies,
    summary,
    wait_http,
)
from doraforge.dataflows import DATAFLOWS
from doraforge.paos.gateway_auth import bearer, dataflow_auth, http_client
from doraforge.skill_runtime.dora_run import (
    Dataflow,
    dora_environment,
    exit_on_sigterm,
    free_port,
)

ECHO = {"arguments": {"message": "x" * 200}}
# By path: Dora runs nodes in the dataflow's folder, where the checkout is not importable.
FLOOR_NODE = Path(__file__).resolve().with_name("dora_floor.py")
QUERY_PATH = "/tools/mock/echo:invoke"
WARMUP = 200


def http_floor(requests: int) -> dict[str, float]:
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "bench.http_floor", str(port)],
        cwd=Path(__file__).resolve().parents[1],
    )
    try:
        wait_http(f"http://127.0.0.1:{port}/health", 30, "HTTP floor server")
        with httpx.Client(base_url=f"http://127.0.0.1:{port}") as client:
            sequential_latencies(client, QUERY_PATH, ECHO, WARMUP)
            return summary(sequential_latencies(client, QUERY_PATH, ECHO, requests))
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:  # never leave the floor server behind
            server.kill()
            server.wait()


def dora_floor(requests: int, workdir: Path, kind: str = "binary") -> dict[str, float]:
    out = workdir / f"dora_floor_{kind}.json"
    dataflow = workdir / f"dora_floor_{kind}.yml"
    dataflow.write_text(
        "nodes:\n"
        "  - id: ping\n    path: python\n"
        f"    args: {FLOOR_NODE} ping {requests + WARMUP} {out} {kind}\n"
        "    inputs:\n      reply: {source: pong/reply, queue_size: 1000}\n"
        "    outputs: [request]\n"
        f"  - id: pong\n    path: python\n    args: {FLOOR_NODE} pong\n"
        "    inputs:\n      request: {source: ping/request, queue_size: 1000}\n"
        "    outputs: [reply]\n",
        encoding="utf-8",
    )
    with (
        (workdir / f"dora_floor_{kind}.log").open("wb") as log,
        Dataflow(dataflow, dora_environment(os.environ), log),
    ):
        deadline = time.monotonic() + 120
        while not out.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
    samples = json.loads(out.read_text(encoding="utf-8"))
    return summary(samples[WARMUP:])


def full_path(requests: int, actions: int, workdir: Path) -> dict[str, object]:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    # The Gateway as skills run it: behind a bearer token, which every request presents.
    with dataflow_auth(os.environ, generate=True) as auth:
        env = dora_environment(
            auth.environment(os.environ),
            DORAFORGE_GATEWAY_PORT=str(port),
            DORAFORGE_GATEWAY_JOURNAL=str(workdir / "gateway.journal"),
            DORAFORGE_LOG_LEVEL="WARNING",
        )
        return _measure(env, base, auth.token, requests, actions, workdir)


def _measure(
    env: dict[str, str],
    base: str,
    token: str | None,
    requests: int,
    actions: int,
    workdir: Path,
) -> dict[str, object]:
    auth = bearer(token)
    with (
        (workdir / "mock.log").open("wb") as log,
        Dataflow(DATAFLOWS / "mock.yml", env, log) as flow,
    ):
        wait_http(f"{base}/tools", 60, "gateway", headers=auth)
        _wait_ready(base, auth)
        with http_client(base, token, timeout_s=30) as client:
            sequential_latencies(client, QUERY_PATH, ECHO, WARMUP)
            latency = summary(sequential_latencies(client, QUERY_PATH, ECHO, requests))
            print(f"  full path: p50 {latency['p50_ms']} ms", flush=True)
            throughput = run(
                concurrent_throughput(
                    base, QUERY_PATH, ECHO, 8, max(250, requests // 4), headers=auth
                )
            )
            print(f"  8 clients: {throughput['qps']} Queries/s", flush=True)
            gateway = find_node(flow.process.pid, "-m doraforge.gateway")
            memory = _actions_rss(client, gateway, actions)
    return {"latency": latency, "throughput": throughput, "rss": memory}


def _wait_ready(base: str, auth: dict[str, str]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        context = httpx.get(f"{base}/tools/mock.echo/context", headers=auth).json()["data"]
        if context["ready"]:
            return
        time.sleep(0.1)
    raise TimeoutError("mock.echo never became ready")


def _actions_rss(client: httpx.Client, gateway, actions: int) -> dict[str, float]:
    body = {"arguments": {"duration_s": 0, "behaviour": "succeed"}}
    baseline_at = min(actions // 4, 5000)
    baseline = None
    started = time.perf_counter()
    for index in range(1, actions + 1):
        admitted = client.post("/tools/mock.move:invoke", json=body)
        if admitted.status_code != 202:
            raise RuntimeError(f"action {index} not admitted: {admitted.text}")
        invocation = admitted.json()["data"]["invocation_id"]
        while client.get(f"/invocations/{invocation}/result").status_code != 200:
            pass
        if index == baseline_at:
            baseline = gateway.memory_info().rss
        if index % 2000 == 0:
            print(f"  actions: {index}/{actions}", flush=True)
    final = gateway.memory_info().rss
    return {
        "actions": actions,
        "baseline_after": baseline_at,
        "rss_baseline_mb": round(baseline / 2**20, 2),
        "rss_final_mb": round(final / 2**20, 2),
        "growth": round(final / baseline, 4),
        "actions_per_s": round(actions / (time.perf_counter() - started), 1),
    }


def main() -> int:
    # Killed by `timeout` or a CI runner, the dataflows and the floor server still stop.
    exit_on_sigterm()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--actions", type=int, default=20000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="doraforge-bench-") as tmp:
        workdir = Path(tmp)
        print("HTTP floor ...", flush=True)
        http = http_floor(args.requests)
        print("Dora floor ...", flush=True)
        dora = dora_floor(args.requests, workdir)
        carrier = dora_floor(args.requests, workdir, "toolmessage")
        print("full path ...", flush=True)
        full = full_path(args.requests, args.actions, workdir)
    floor_sum = http["p50_ms"] + dora["p50_ms"]
    ratio = full["latency"]["p50_ms"] / floor_sum
    report = {
        "benchmark": "gateway_query",
        "http_floor": http,
        "dora_floor": dora,
        "dora_toolmessage_roundtrip": carrier,
        "full_path": full["latency"],
        "throughput_8_clients": full["throughput"],
        "gateway_rss": full["rss"],
        "targets": {
            "full_p50_over_floor_sum": {"value": round(ratio, 3), "limit": 1.3, "better": "lower"},
            "queries_per_s_8_clients": {
                "value": full["throughput"]["qps"],
                "limit": 1000,
                "better": "higher",
            },
            "gateway_rss_growth": {
                "value": full["rss"]["growth"],
                "limit": 1.10,
                "better": "lower",
            },
        },
    }
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM: what it started has been stopped
        sys.exit("interrupted; the benchmark stopped what it started")
