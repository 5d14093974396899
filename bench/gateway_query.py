"""Benchmark: Query round trip through HTTP -> Gateway -> Dora -> mock provider -> back.

Measured in one run beside its floors, each taken the same way and kept running, in
alternating rounds (HTTP floor, Dora floor, full path; then the HTTP floor's and the full
path's 8-client throughput), so a noisy moment spoils one round, not a ratio:
  * HTTP floor: the Gateway's HTTP stack answering the Query route without Dora;
  * Dora floor: a 200-byte request/reply between two bare Dora Python nodes (and, beside
    it, the same round trip of an undecoded ``forge_msgs.ToolMessage`` row);
  * full path: ``dataflows/mock.yml``, the ``mock/echo`` Query with a 200-byte message.
Each ratio is the median of its per-round ratios. Then the Gateway's RSS across many
Actions (bounded retention must keep it flat). The last line printed is one JSON object.

    python bench/gateway_query.py [--requests 2000] [--rounds 5] [--actions 20000]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.support import (
    Rounds,
    benchmark_main,
    concurrent_throughput,
    find_node,
    run,
    sequential_latencies,
    summary,
    wait_http,
)
from doraforge.dataflows import DATAFLOWS
from doraforge.paos.gateway_auth import bearer, dataflow_auth, http_client
from doraforge.skill_runtime.dora_run import Dataflow, dora_environment, free_port

ECHO = {"arguments": {"message": "x" * 200}}
# By path: Dora runs nodes in the dataflow's folder, where the checkout is not importable.
FLOOR_NODE = Path(__file__).resolve().with_name("dora_floor.py")
#: Where the Dora floor's round socket lives: short, whatever $TMPDIR is.
SOCKET_ROOT = "/tmp" if os.path.isdir("/tmp") else None
QUERY_PATH = "/tools/mock/echo:invoke"
WARMUP = 200
CLIENTS = 8
#: The issue's targets (issue 16): full-path p50 at most 1.6 x the floors' sum, 8-client
#: throughput at least half the HTTP floor's, Gateway RSS flat within 10 % and at most
#: 150 MiB after 20,000 Actions.
P50_LIMIT = 1.6
THROUGHPUT_LIMIT = 0.5
RSS_GROWTH_LIMIT = 1.10
RSS_STEADY_LIMIT_MIB = 150


@contextlib.contextmanager
def http_floor() -> Iterator[str]:
    """The HTTP floor server, running; yields its base URL."""
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "bench.http_floor", str(port)],
        cwd=Path(__file__).resolve().parents[1],
    )
    try:
        wait_http(f"http://127.0.0.1:{port}/health", 30, "HTTP floor server")
        yield f"http://127.0.0.1:{port}"
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:  # never leave the floor server behind
            server.kill()
            server.wait()


class DoraFloor:
    """The two bare nodes of the Dora floor, running; :meth:`round` asks for one round."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def round(self, kind: str, count: int) -> list[float]:
        """``count`` sequential round trips of ``kind``; their latencies in seconds."""
        self._stream.write(f"{kind} {count}\n")
        self._stream.flush()
        line = self._stream.readline()
        if not line:
            raise RuntimeError("the Dora floor's ping node stopped; see dora_floor.log")
        samples: list[float] = json.loads(line)
        return samples


@contextlib.contextmanager
def dora_floor(workdir: Path) -> Iterator[DoraFloor]:
    """Start the floor dataflow and connect to its ping node's round socket."""
    # A Unix socket path holds at most 107 bytes; $TMPDIR (pytest's, a CI runner's) can be
    # longer, so the socket gets a short private folder of its own.
    with tempfile.TemporaryDirectory(prefix="doraforge-floor-", dir=SOCKET_ROOT) as sockets:
        yield from _dora_floor(workdir, Path(sockets) / "round.sock")


def _dora_floor(workdir: Path, path: Path) -> Iterator[DoraFloor]:
    dataflow = workdir / "dora_floor.yml"
    dataflow.write_text(
        "nodes:\n"
        "  - id: ping\n    path: python\n"
        f"    args: {FLOOR_NODE} ping {path}\n"
        "    inputs:\n      reply: {source: pong/reply, queue_size: 1000}\n"
        "    outputs: [request]\n"
        f"  - id: pong\n    path: python\n    args: {FLOOR_NODE} pong\n"
        "    inputs:\n      request: {source: ping/request, queue_size: 1000}\n"
        "    outputs: [reply]\n",
        encoding="utf-8",
    )
    with (
        (workdir / "dora_floor.log").open("wb") as log,
        Dataflow(dataflow, dora_environment(os.environ), log),
        _connect(path, 120) as connection,
        connection.makefile("rw", encoding="utf-8") as stream,
    ):
        floor = DoraFloor(stream)
        for kind in ("binary", "toolmessage"):
            floor.round(kind, WARMUP)
        print("  Dora floor: up", flush=True)
        yield floor


def _connect(path: Path, timeout_s: float) -> socket.socket:
    """Connect to the ping node's socket once it listens (bounded wait)."""
    deadline = time.monotonic() + timeout_s
    while True:
        connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            connection.connect(str(path))
            return connection
        except (FileNotFoundError, ConnectionRefusedError):
            connection.close()
            if time.monotonic() > deadline:
                raise TimeoutError(f"the Dora floor never listened on {path}") from None
            time.sleep(0.1)


@dataclass
class FullPath:
    """The mock dataflow behind a bearer token, running and ready."""

    base: str
    token: str | None
    gateway: psutil.Process


@contextlib.contextmanager
def full_path(workdir: Path) -> Iterator[FullPath]:
    """``dataflows/mock.yml`` as skills run it: behind a token every request presents."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with dataflow_auth(os.environ, generate=True) as auth:
        env = dora_environment(
            auth.environment(os.environ),
            DORAFORGE_GATEWAY_PORT=str(port),
            DORAFORGE_GATEWAY_JOURNAL=str(workdir / "gateway.journal"),
            DORAFORGE_LOG_LEVEL="WARNING",
        )
        with (
            (workdir / "mock.log").open("wb") as log,
            Dataflow(DATAFLOWS / "mock.yml", env, log) as flow,
        ):
            headers = bearer(auth.token)
            wait_http(
                f"{base}/tools",
                60,
                "gateway",
                headers=headers,
                log=workdir / "mock.log",
                running=flow.running,
            )
            _wait_ready(base, headers)
            assert flow.process is not None  # started by the with statement
            gateway = find_node(flow.process.pid, "-m doraforge.gateway")
            yield FullPath(base, auth.token, gateway)


def _wait_ready(base: str, auth: dict[str, str]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        context = httpx.get(f"{base}/tools/mock.echo/context", headers=auth).json()["data"]
        if context["ready"]:
            return
        time.sleep(0.1)
    raise TimeoutError("mock.echo never became ready")


@dataclass
class Samples:
    """Every round's latencies (seconds) and 8-client throughput (Queries/s) per side."""

    latencies: dict[str, list[list[float]]] = field(default_factory=dict)
    qps: dict[str, list[float]] = field(default_factory=dict)

    def add_latencies(self, side: str, samples: list[float]) -> float:
        self.latencies.setdefault(side, []).append(samples)
        return summary(samples)["p50_ms"]

    def add_qps(self, side: str, figures: dict[str, float]) -> float:
        if figures["failures"]:
            raise RuntimeError(f"{side}: {figures['failures']} failed requests under load")
        self.qps.setdefault(side, []).append(figures["qps"])
        return figures["qps"]

    def p50s(self, side: str) -> tuple[float, ...]:
        return tuple(summary(samples)["p50_ms"] for samples in self.latencies[side])

    def pooled(self, side: str) -> dict[str, Any]:
        """All rounds' samples together, and each round's p50."""
        every = [value for samples in self.latencies[side] for value in samples]
        return {**summary(every), "p50_ms_rounds": list(self.p50s(side))}


def measure_rounds(
    http: str, dora: DoraFloor, full: FullPath, requests: int, rounds: int
) -> Samples:
    """``rounds`` rounds of floor, subject, floor, subject."""
    samples = Samples()
    per_client = max(250, requests // 4)
    auth = bearer(full.token)
    with (
        httpx.Client(base_url=http) as floor_client,
        http_client(full.base, full.token, timeout_s=30) as full_client,
    ):
        sequential_latencies(floor_client, QUERY_PATH, ECHO, WARMUP)
        sequential_latencies(full_client, QUERY_PATH, ECHO, WARMUP)
        for index in range(rounds):
            line = [
                samples.add_latencies(
                    "http", sequential_latencies(floor_client, QUERY_PATH, ECHO, requests)
                ),
                samples.add_latencies("dora", dora.round("binary", requests)),
                samples.add_latencies("toolmessage", dora.round("toolmessage", requests)),
                samples.add_latencies(
                    "full", sequential_latencies(full_client, QUERY_PATH, ECHO, requests)
                ),
                samples.add_qps(
                    "http", run(concurrent_throughput(http, QUERY_PATH, ECHO, CLIENTS, per_client))
                ),
                samples.add_qps(
                    "full",
                    run(
                        concurrent_throughput(
                            full.base, QUERY_PATH, ECHO, CLIENTS, per_client, headers=auth
                        )
                    ),
                ),
            ]
            print(
                f"  round {index + 1}/{rounds}: p50 HTTP {line[0]} + Dora {line[1]} ms, "
                f"full {line[3]} ms; {CLIENTS} clients {line[4]} vs {line[5]} Queries/s",
                flush=True,
            )
    return samples


def actions_rss(full: FullPath, actions: int) -> dict[str, float]:
    """The Gateway's RSS after a quarter of ``actions`` (at most 5,000) and after all."""
    body = {"arguments": {"duration_s": 0, "behaviour": "succeed"}}
    baseline_at = max(1, min(actions // 4, 5000))
    baseline = 0
    started = time.perf_counter()
    lapses = 0
    with http_client(full.base, full.token, timeout_s=30) as client:
        for index in range(1, actions + 1):
            admitted, refused = _admitted(client, body, index)
            lapses += refused
            invocation = admitted.json()["data"]["invocation_id"]
            while client.get(f"/invocations/{invocation}/result").status_code != 200:
                pass
            if index == baseline_at:
                baseline = full.gateway.memory_info().rss
            if index % 2000 == 0:
                print(f"  actions: {index}/{actions}", flush=True)
    final = full.gateway.memory_info().rss
    return {
        "actions": actions,
        "baseline_after": baseline_at,
        "rss_baseline_mib": round(baseline / 2**20, 2),
        "rss_final_mib": round(final / 2**20, 2),
        "growth": round(final / baseline, 4),
        "actions_per_s": round(actions / (time.perf_counter() - started), 1),
        "unavailable_refusals": lapses,
    }


#: How long an Action's admission waits for the provider's lease to return.
LEASE_RETURN_S = 30.0


def _admitted(client: httpx.Client, body: dict[str, Any], index: int) -> tuple[httpx.Response, int]:
    """The 202 admitting Action ``index``, and how many retryable refusals came first.

    On a loaded machine the mock provider's lease can lapse for a moment (its renewal
    starved of CPU); the Gateway then refuses ``FORGE_TOOL_ENDPOINT_UNAVAILABLE``,
    retryable, with nothing admitted, so asking again is safe. Those refusals are counted
    in the figures, never hidden; a non-retryable one, or no lease within
    :data:`LEASE_RETURN_S`, ends the run."""
    deadline = time.monotonic() + LEASE_RETURN_S
    refused = 0
    while True:
        admitted = client.post("/tools/mock.move:invoke", json=body)
        if admitted.status_code == 202:
            return admitted, refused
        retryable = admitted.status_code == 503 and _retryable(admitted)
        if not retryable or time.monotonic() > deadline:
            raise RuntimeError(f"action {index} not admitted: {admitted.text}")
        refused += 1
        time.sleep(0.05)


def _retryable(answer: httpx.Response) -> bool:
    try:
        return bool(answer.json()["error"]["retryable"])
    except (ValueError, KeyError, TypeError):
        return False


def report(samples: Samples, rss: dict[str, float], rounds: int) -> dict[str, Any]:
    """The benchmark's JSON line: raw figures, per-round ratios and the targets map."""
    floor_sum = tuple(
        h + d for h, d in zip(samples.p50s("http"), samples.p50s("dora"), strict=True)
    )
    latency = Rounds(floor=floor_sum, subject=samples.p50s("full"))
    throughput = Rounds(floor=tuple(samples.qps["http"]), subject=tuple(samples.qps["full"]))
    return {
        "benchmark": "gateway_query",
        "rounds": rounds,
        "http_floor": samples.pooled("http"),
        "dora_floor": samples.pooled("dora"),
        "dora_toolmessage_roundtrip": samples.pooled("toolmessage"),
        "full_path": samples.pooled("full"),
        "p50_over_floor_sum": latency.figures("floor_sum_ms", "full_ms"),
        "throughput_8_clients": {
            "http_floor_qps_rounds": samples.qps["http"],
            "full_qps_rounds": samples.qps["full"],
            "http_floor_qps": statistics.median(samples.qps["http"]),
            "full_qps": statistics.median(samples.qps["full"]),
            "ratio_rounds": [round(value, 3) for value in throughput.ratios],
        },
        "gateway_rss": rss,
        "targets": {
            "full_p50_over_floor_sum": {
                "value": round(latency.ratio, 3),
                "limit": P50_LIMIT,
                "better": "lower",
            },
            "throughput_8_clients_over_http_floor_8_clients": {
                "value": round(throughput.ratio, 3),
                "limit": THROUGHPUT_LIMIT,
                "better": "higher",
            },
            "rss_growth_ratio": {
                "value": rss["growth"],
                "limit": RSS_GROWTH_LIMIT,
                "better": "lower",
            },
            "rss_steady_mib": {
                "value": rss["rss_final_mib"],
                "limit": RSS_STEADY_LIMIT_MIB,
                "better": "lower",
            },
        },
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000, help="sequential Queries per round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--actions", type=int, default=20000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="doraforge-bench-") as tmp:
        workdir = Path(tmp)
        print("starting the HTTP floor, the Dora floor and the full path ...", flush=True)
        with http_floor() as http, dora_floor(workdir) as dora, full_path(workdir) as full:
            samples = measure_rounds(http, dora, full, args.requests, args.rounds)
            print("Actions ...", flush=True)
            rss = actions_rss(full, args.actions)
    print(json.dumps(report(samples, rss, args.rounds)))
    return 0


if __name__ == "__main__":
    benchmark_main(main)
