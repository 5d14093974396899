"""Benchmark: the agent-context tools over a full scope (1,000 inspected items).

In-process part: ``ContextService.call("search_context")`` over one source at the scan
cap (1,000 items), beside a bare floor doing only the irreducible work in the same run —
lower-casing and matching the query's words against each item's label and text, keeping
the first ``limit`` hits and serialising them. The ratio is what validation, ranking,
redaction-free rendering, the output model and the budgets cost on top.

MCP part: the same ``search_context`` as a ``tools/call`` round trip through a real
registry app on a loopback socket, beside the same endpoint's ``ping`` round trip (the
transport floor: guard, JSON-RPC parsing, answer) in the same run.

Rounds alternate between each pair and the median round is reported. The last line
printed is one JSON object.

    python bench/context.py [--calls 300] [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.registry import MCP_HEADERS, _serve_in_thread
from doraforge.registry.context.service import ContextService
from doraforge.registry.context.source import (
    MAX_SCAN_ITEMS,
    ContextItem,
    Scope,
    Snapshot,
    opaque_ref,
)

QUERY = "gripper calibration"
LIMIT = 10
_WORDS = ("arm", "gripper", "camera", "cube", "table", "calibration", "home", "place")


class ScanSource:
    """One scope of ``MAX_SCAN_ITEMS`` synthetic items (a full scan every call)."""

    scope: Scope = "tasks"

    def __init__(self) -> None:
        self.items = tuple(_item(i) for i in range(MAX_SCAN_ITEMS))

    async def snapshot(self, limit: int = MAX_SCAN_ITEMS) -> Snapshot:
        return Snapshot(self.items[:limit], source_truncated=len(self.items) > limit)


def _item(i: int) -> ContextItem:
    words = " ".join(_WORDS[(i * k) % len(_WORDS)] for k in range(1, 6))
    return ContextItem(
        ref=opaque_ref("tasks", str(i)),
        scope="tasks",
        kind="task",
        label=f"task {i} {words}",
        route=f"doraforge task show {i}",
        metadata={"status": "succeeded" if i % 3 else "failed", "skill": "sim-pick-place"},
        counts={"criteria": i % 5},
        text=f"pick the cube {i} and place it; {words}",
    )


def bare_search(items: tuple[ContextItem, ...], query: str, limit: int) -> str:
    """The floor: match every item's words, keep the first ``limit`` hits, serialise."""
    wanted = query.lower().split()
    hits = []
    for item in items:
        words = f"{item.label} {item.text}".lower()
        if any(w in words for w in wanted):
            hits.append({"ref": item.ref, "label": item.label, "route": item.route})
    return json.dumps({"items": hits[:limit], "total": len(hits)})


def bare_round(items: tuple[ContextItem, ...], n: int) -> float:
    started = time.perf_counter()
    for _ in range(n):
        bare_search(items, QUERY, LIMIT)
    return (time.perf_counter() - started) / n


async def service_round(service: ContextService, n: int) -> float:
    arguments = {"query": QUERY, "limit": LIMIT}
    started = time.perf_counter()
    for _ in range(n):
        result = await service.call("search_context", arguments)
        if not result["items"]:
            raise RuntimeError("the benchmark search must find items")
    return (time.perf_counter() - started) / n


async def in_process(calls: int, rounds: int) -> dict[str, Any]:
    source = ScanSource()
    service = ContextService({"tasks": source})
    bare_round(source.items, 20)
    await service_round(service, 20)
    bare, full = [], []
    for r in range(rounds):
        bare.append(bare_round(source.items, calls))
        full.append(await service_round(service, calls))
        print(
            f"round {r + 1}/{rounds}: bare {bare[-1] * 1e3:.3f} ms, "
            f"search_context {full[-1] * 1e3:.3f} ms",
            flush=True,
        )
    bare_ms, call_ms = statistics.median(bare) * 1e3, statistics.median(full) * 1e3
    return {
        "items": MAX_SCAN_ITEMS,
        "calls_per_round": calls,
        "rounds": rounds,
        "bare_scan_ms": round(bare_ms, 4),
        "search_context_ms": round(call_ms, 4),
        "search_over_bare_scan": round(call_ms / bare_ms, 3),
        "bare_rounds_ms": [round(x * 1e3, 4) for x in bare],
        "search_rounds_ms": [round(x * 1e3, 4) for x in full],
    }


def _app() -> Any:
    from doraforge.registry.server import build_app, new_service
    from doraforge.registry.settings import ServerSettings

    settings = ServerSettings(mcp_enabled=True, context_scopes=frozenset({"tasks"}))
    return build_app(new_service(settings), settings, context_sources={"tasks": ScanSource()})


async def _mcp_round(client: Any, url: str, n: int, method: str) -> float:
    params = {"name": "search_context", "arguments": {"query": QUERY, "limit": LIMIT}}
    started = time.perf_counter()
    for i in range(n):
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": i, "method": method}
        if method == "tools/call":
            message["params"] = params
        answer = await client.post(url, json=message, headers=MCP_HEADERS)
        result = answer.json().get("result")
        if answer.status_code != 200 or result is None or result.get("isError"):
            raise RuntimeError(f"MCP {method} failed: {answer.text[:300]}")
    return (time.perf_counter() - started) / n


async def _mcp_rounds(url: str, calls: int, rounds: int) -> tuple[list[float], list[float]]:
    import httpx

    async with httpx.AsyncClient(timeout=30) as client:
        await _mcp_round(client, url, 20, "ping")
        await _mcp_round(client, url, 20, "tools/call")
        pings, searches = [], []
        for r in range(rounds):
            pings.append(await _mcp_round(client, url, calls, "ping"))
            searches.append(await _mcp_round(client, url, calls, "tools/call"))
            print(
                f"mcp round {r + 1}/{rounds}: ping {pings[-1] * 1e3:.3f} ms, "
                f"search_context {searches[-1] * 1e3:.3f} ms",
                flush=True,
            )
    return pings, searches


def mcp_figures(calls: int, rounds: int) -> dict[str, Any]:
    server, thread, url = _serve_in_thread(_app())
    try:
        pings, searches = asyncio.run(_mcp_rounds(url, calls, rounds))
    finally:
        server.should_exit = True
        thread.join(15)
    ping_ms, search_ms = statistics.median(pings) * 1e3, statistics.median(searches) * 1e3
    return {
        "calls_per_round": calls,
        "rounds": rounds,
        "ping_round_trip_ms": round(ping_ms, 4),
        "search_round_trip_ms": round(search_ms, 4),
        "search_over_ping": round(search_ms / ping_ms, 3),
        "ping_rounds_ms": [round(x * 1e3, 4) for x in pings],
        "search_rounds_ms": [round(x * 1e3, 4) for x in searches],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    figures = asyncio.run(in_process(args.calls, args.rounds))
    mcp = mcp_figures(max(20, args.calls // 2), args.rounds)
    report = {
        "benchmark": "context",
        "in_process": figures,
        "mcp": mcp,
        "targets": {
            "search_over_bare_scan": {
                "value": figures["search_over_bare_scan"],
                "limit": LIMITS["search_over_bare_scan"],
                "better": "lower",
            },
            "mcp_search_over_ping": {
                "value": mcp["search_over_ping"],
                "limit": LIMITS["mcp_search_over_ping"],
                "better": "lower",
            },
        },
    }
    print(json.dumps(report))


#: A search scores every one of the 1,000 items in Python (cached word strings, one C
#: substring search per field and term): ten bare scans, and over MCP six pings.
LIMITS = {"search_over_bare_scan": 10.0, "mcp_search_over_ping": 6.0}

if __name__ == "__main__":
    main()
