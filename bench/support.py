"""Shared pieces of the benchmarks: percentiles, latency loops, node processes."""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import aiohttp
import httpx
import psutil


def summary(samples_s: list[float]) -> dict[str, float]:
    """p50/p99/mean of latencies given in seconds, reported in milliseconds."""
    ordered = sorted(samples_s)
    return {
        "n": len(ordered),
        "p50_ms": round(ordered[len(ordered) // 2] * 1000, 4),
        "p99_ms": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000, 4),
        "mean_ms": round(statistics.fmean(ordered) * 1000, 4),
    }


def sequential_latencies(
    client: httpx.Client, url: str, body: dict[str, Any], n: int
) -> list[float]:
    """Time ``n`` sequential POSTs; every answer must be 200 or the run is void."""
    samples = []
    for _ in range(n):
        started = time.perf_counter()
        response = client.post(url, json=body)
        samples.append(time.perf_counter() - started)
        if response.status_code != 200:
            raise RuntimeError(f"benchmark request failed: {response.status_code} {response.text}")
    return samples


async def concurrent_throughput(
    base_url: str,
    path: str,
    body: dict[str, Any],
    clients: int,
    per_client: int,
    *,
    headers: Mapping[str, str] | None = None,
) -> dict[str, float]:
    """Requests per second with ``clients`` concurrent keep-alive clients, each request
    also carrying ``headers`` (the Gateway's ``Authorization``).

    The load generator is aiohttp (C-accelerated HTTP parsing): on 2 shared cores an
    httpx client spent ~850 us of CPU per request, more than the Gateway itself, and
    would have measured the client rather than the server.
    """
    payload = json.dumps(body).encode()
    json_type = {"content-type": "application/json"}
    failures = 0

    async def worker(session: aiohttp.ClientSession) -> None:
        nonlocal failures
        for _ in range(per_client):
            async with session.post(path, data=payload, headers=json_type) as response:
                await response.read()
                failures += response.status != 200

    connector = aiohttp.TCPConnector(limit=clients)
    async with aiohttp.ClientSession(
        base_url, connector=connector, headers=dict(headers or {})
    ) as session:
        await asyncio.gather(*(worker_warmup(session, path, payload) for _ in range(clients)))
        started = time.perf_counter()
        await asyncio.gather(*(worker(session) for _ in range(clients)))
        elapsed = time.perf_counter() - started
    total = clients * per_client
    return {
        "requests": total,
        "failures": failures,
        "seconds": round(elapsed, 3),
        "qps": round(total / elapsed, 1),
    }


async def worker_warmup(session: aiohttp.ClientSession, path: str, payload: bytes) -> None:
    """Open a keep-alive connection before timing."""
    headers = {"content-type": "application/json"}
    async with session.post(path, data=payload, headers=headers) as response:
        await response.read()


def wait_http(
    url: str, timeout_s: float, label: str, *, headers: Mapping[str, str] | None = None
) -> None:
    """Wait (bounded, with a progress line) until ``url`` answers 200 to ``headers``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, headers=headers, timeout=1).status_code == 200:
                print(f"  {label}: up", flush=True)
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise TimeoutError(f"{label} did not answer {url} within {timeout_s} s")


def wait_json(fetch: Callable[[], Any], accept: Callable[[Any], bool], timeout_s: float) -> Any:
    """Poll ``fetch`` until ``accept`` holds, within ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = fetch()
        if accept(value):
            return value
        time.sleep(0.05)
    raise TimeoutError("condition not reached in time")


def find_node(root_pid: int, marker: str) -> psutil.Process:
    """The descendant process of ``root_pid`` whose command line contains ``marker``."""
    for child in psutil.Process(root_pid).children(recursive=True):
        try:
            if marker in " ".join(child.cmdline()):
                return child
        except psutil.NoSuchProcess:
            continue
    raise LookupError(f"no node process with {marker!r} under pid {root_pid}")


def run(coroutine: Awaitable[Any]) -> Any:
    """Run a coroutine on a fresh loop."""
    return asyncio.run(coroutine)  # type: ignore[arg-type]
