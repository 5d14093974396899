"""Benchmark: the semantic tool registry.

In-process part (this module's own figures): the per-call overhead of
``RegistryService.call`` for a trivial read tool — envelope parsing, resolution, input
validation, gates, idempotency bookkeeping, execution, output validation and the audit
record — beside a bare compiled ``jsonschema`` validation (``is_valid``) of the same
arguments, in the same run. Every call uses a fresh ``requestId``, so each one takes the
full path (no replay). Rounds alternate (bare, call, bare, call ...); the target is the
median of the per-round ratios.

The MCP ``tools/call`` round trip (registry endpoint beside the official ``mcp`` SDK's own
server) is the server part: ``mcp_round_trip`` is its slot, and its figures go under the
``"mcp"`` key of the output object and its targets beside the in-process one.

The MCP-source part (``"mcp_source"``): a third-party stdio MCP server (a FastMCP echo
server written to a temporary directory) behind tier 1, called through every gate
(``RegistryService.call`` -> ``McpSource`` -> ``ClientSession.call_tool``), beside the
official SDK client calling a second process of the same server directly, rounds
interleaved. Target: at most 1.3x the direct call plus the gate overhead measured above
(``call_overhead_us``). Also the start-up time (spawn to tools listed) in tier 1 and, where
bubblewrap runs, tier 2.
The last line printed is one JSON object.

    python bench/registry.py [--calls 20000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.support import Rounds, benchmark_main, interleave_async
from doraforge.registry.model import Principal
from doraforge.registry.service import RegistryService

SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["query"],
    "properties": {
        "query": {"type": "string", "maxLength": 200},
        "limit": {"type": "integer", "minimum": 1, "maximum": 25},
    },
}
ARGUMENTS = {"query": "pick the red cube", "limit": 5}
PRINCIPAL = Principal(id="bench", scope="agent", grants=frozenset({"robot.read"}))
WARMUP = 500


async def _echo(arguments: dict[str, Any]) -> dict[str, Any]:
    return {"ok": True}


def _service() -> RegistryService:
    service = RegistryService()
    service.register(
        {
            "name": "bench.echo",
            "providerName": "bench_echo",
            "description": "Answer ok; a trivial read tool.",
            "input_schema": SCHEMA,
            "output_schema": {"type": "object"},
            "policy": {
                "scopes": ["agent"],
                "requiredCapabilities": ["robot.read"],
                "sideEffect": "read",
                "idempotent": True,
                "risk": "low",
            },
        },
        _echo,
    )
    return service


def bare_round(validator: Draft202012Validator, n: int) -> float:
    """Seconds per ``is_valid`` of the benchmark arguments."""
    started = time.perf_counter()
    for _ in range(n):
        if not validator.is_valid(ARGUMENTS):
            raise RuntimeError("benchmark arguments must be valid")
    return (time.perf_counter() - started) / n


async def call_round(service: RegistryService, n: int, offset: int) -> float:
    """Seconds per full ``service.call`` with a fresh requestId each time."""
    bodies = [
        {"requestId": f"bench-{offset + i}", "name": "bench.echo", "arguments": dict(ARGUMENTS)}
        for i in range(n)
    ]
    started = time.perf_counter()
    for body in bodies:
        result = await service.call(body, PRINCIPAL)
        if result["state"] != "completed":
            raise RuntimeError(f"benchmark call failed: {result}")
    return (time.perf_counter() - started) / n


async def in_process(calls: int, rounds: int) -> dict[str, Any]:
    service = _service()
    validator = Draft202012Validator(SCHEMA)
    bare_round(validator, WARMUP)
    await call_round(service, WARMUP, offset=-WARMUP - 1)
    measured = await interleave_async(
        lambda r: bare_round(validator, calls),
        lambda r: call_round(service, calls, offset=r * calls),
        rounds,
        show=_shown("round", "bare", "call", rounds),
    )
    bare_us, call_us = measured.median("floor") * 1e6, measured.median("subject") * 1e6
    return {
        "calls_per_round": calls,
        "rounds": rounds,
        "bare_validation_us": round(bare_us, 3),
        "call_us": round(call_us, 3),
        "call_overhead_us": round(call_us - bare_us, 3),
        **measured.figures("bare_us", "call_us", scale=1e6),
        "call_over_bare_validation": round(measured.ratio, 3),
    }


def _shown(what: str, floor: str, subject: str, rounds: int) -> Any:
    """A progress line per round: both figures in microseconds and their ratio."""

    def show(index: int, floor_s: float, subject_s: float) -> None:
        print(
            f"{what} {index + 1}/{rounds}: {floor} {floor_s * 1e6:.2f} us, "
            f"{subject} {subject_s * 1e6:.2f} us ({subject_s / floor_s:.2f})",
            flush=True,
        )

    return show


def mcp_round_trip(calls: int) -> tuple[dict[str, Any] | None, dict[str, Any]]:
    """SERVER part (slot): MCP ``tools/call`` round trips through the registry endpoint and
    through the official SDK's own stateless server, same tool, same run.

    Returns ``(figures, targets)``; ``targets`` entries use the same
    ``{"value", "limit", "better"}`` shape.
    """
    return mcp_figures(max(200, calls // 20), rounds=5)


# ---------------------------------------------------------------- SERVER part: MCP round trip

MCP_HEADERS = {
    "accept": "application/json, text/event-stream",
    "content-type": "application/json",
    "mcp-protocol-version": "2025-06-18",
}


def _sdk_app() -> Any:
    """The official SDK's own stateless JSON server with the same trivial tool."""
    from mcp.server.fastmcp import FastMCP

    server = FastMCP("bench", stateless_http=True, json_response=True, log_level="WARNING")

    @server.tool(name="bench_echo", description="Answer ok; a trivial read tool.")
    async def bench_echo(query: str, limit: int = 5) -> dict[str, Any]:
        return {"ok": True}

    return server.streamable_http_app()


def _registry_app() -> Any:
    from doraforge.registry.server import build_app
    from doraforge.registry.settings import ServerSettings

    settings = ServerSettings(grants=frozenset({"robot.read"}), mcp_enabled=True)
    return build_app(_service(), settings)


def _serve_in_thread(app: Any) -> tuple[Any, Any, str]:
    import threading

    import uvicorn

    from doraforge.registry.server import uvicorn_config

    server = uvicorn.Server(uvicorn_config(app, "127.0.0.1", 0))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 15
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.005)
    port = server.servers[0].sockets[0].getsockname()[1]
    return server, thread, f"http://127.0.0.1:{port}/mcp"


async def _mcp_round(client: Any, url: str, n: int) -> float:
    """Seconds per ``tools/call`` round trip (POST, JSON answer, result checked)."""
    params = {"name": "bench_echo", "arguments": dict(ARGUMENTS)}
    started = time.perf_counter()
    for i in range(n):
        message = {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": params}
        answer = await client.post(url, json=message, headers=MCP_HEADERS)
        result = answer.json().get("result")
        if answer.status_code != 200 or not result or result.get("isError"):
            raise RuntimeError(f"MCP call failed at {url}: {answer.text[:300]}")
    return (time.perf_counter() - started) / n


async def _mcp_rounds(ours: str, sdk: str, calls: int, rounds: int) -> Rounds:
    import httpx

    async with httpx.AsyncClient(timeout=30) as client:
        await _mcp_round(client, ours, 50)
        await _mcp_round(client, sdk, 50)
        return await interleave_async(
            lambda r: _mcp_round(client, sdk, calls),
            lambda r: _mcp_round(client, ours, calls),
            rounds,
            show=_shown("mcp round", "sdk", "registry", rounds),
        )


def mcp_figures(calls: int, *, rounds: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """Both servers on real loopback sockets in this process, the same httpx client
    alternating rounds between them; the median round of each is reported."""
    servers = [_serve_in_thread(_registry_app()), _serve_in_thread(_sdk_app())]
    try:
        measured = asyncio.run(_mcp_rounds(servers[0][2], servers[1][2], calls, rounds))
    finally:
        for server, thread, _url in servers:
            server.should_exit = True
            thread.join(15)
    ours_us, sdk_us = measured.median("subject") * 1e6, measured.median("floor") * 1e6
    ratio = round(measured.ratio, 3)
    figures = {
        "calls_per_round": calls,
        "rounds": rounds,
        "registry_round_trip_us": round(ours_us, 1),
        "sdk_round_trip_us": round(sdk_us, 1),
        **measured.figures("sdk_us", "registry_us", scale=1e6, digits=1),
        "registry_over_sdk": ratio,
    }
    target = {"mcp_round_trip_over_sdk": {"value": ratio, "limit": 1, "better": "lower"}}
    return figures, target


# ------------------------------------------------------------ MCP-source part: stdio servers

STDIO_SERVER = """
from mcp.server.fastmcp import FastMCP
from mcp.types import ToolAnnotations

server = FastMCP("bench-source", log_level="WARNING")


@server.tool(annotations=ToolAnnotations(readOnlyHint=True))
def echo(query: str, limit: int = 5) -> dict:
    return {"ok": True}


server.run("stdio")
"""
SOURCE_TOOL = "mcp__bench__echo"
SOURCE_PRINCIPAL = Principal(id="bench", scope="agent", grants=frozenset({"mcp.bench"}))


def _source_config(script: Path, tier: int) -> Any:
    from doraforge.registry.sources.config import parse_server

    raw = {"command": sys.executable, "args": [str(script)], "tier": tier, "risk": "low"}
    return parse_server("bench", raw)


async def _started(home: Path, script: Path, tier: int) -> tuple[Any, float]:
    """A registry with the bench server as its source, started; and the start-up seconds."""
    from doraforge.registry.sources import McpSources, default_runtime
    from doraforge.registry.sources.mcp_servers import McpSource

    sources = McpSources(RegistryService(), home, runtime=default_runtime(), credentials={})
    source: McpSource = sources.add("bench", _source_config(script, tier))
    started = time.perf_counter()
    await sources.start_all()
    if source.state != "ready":
        await sources.stop_all()
        raise RuntimeError(f"bench MCP server (tier {tier}) did not start: {source.reason}")
    return sources, time.perf_counter() - started


async def _gated_round(service: RegistryService, n: int, offset: int) -> float:
    started = time.perf_counter()
    for i in range(n):
        body = {"requestId": f"src-{offset + i}", "name": SOURCE_TOOL, "arguments": ARGUMENTS}
        result = await service.call(body, SOURCE_PRINCIPAL)
        if result["state"] != "completed":
            raise RuntimeError(f"gated MCP-source call failed: {result}")
    return (time.perf_counter() - started) / n


async def _direct_round(session: Any, n: int) -> float:
    started = time.perf_counter()
    for _ in range(n):
        result = await session.call_tool("echo", dict(ARGUMENTS))
        if result.isError:
            raise RuntimeError("direct MCP call failed")
    return (time.perf_counter() - started) / n


async def _source_rounds(home: Path, errlog: Any, calls: int, rounds: int) -> dict[str, Any]:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    script = home / "bench_server.py"
    script.write_text(STDIO_SERVER)
    sources, startup_s = await _started(home / "tier1", script, 1)
    params = StdioServerParameters(command=sys.executable, args=[str(script)])
    try:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            await _direct_round(session, 20)
            await _gated_round(sources.service, 20, offset=-100)
            measured = await interleave_async(
                lambda r: _direct_round(session, calls),
                lambda r: _gated_round(sources.service, calls, offset=r * calls),
                rounds,
                show=_shown("mcp-source round", "direct", "gated", rounds),
            )
    finally:
        await sources.stop_all()
    return {"rounds": measured, "tier1_startup_s": startup_s}


async def _tier2_startup(home: Path) -> float | None:
    """Start-up seconds of the same server in tier 2; ``None`` when bwrap cannot run here."""
    from doraforge.registry.sources.tiers import TIERS

    reason = TIERS[2].available()
    if reason is not None:
        print(f"tier 2 start-up not measured: {reason}", flush=True)
        return None
    sources, startup_s = await _started(home / "tier2", home / "bench_server.py", 2)
    await sources.stop_all()
    return startup_s


def mcp_source_figures(
    calls: int, rounds: int, gate_overhead_us: float
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The MCP-source figures and targets (see the module docstring)."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="bench-mcp-source-") as tmp:
        home = Path(tmp)
        with (home / "direct.log").open("w") as errlog:
            measured = asyncio.run(_source_rounds(home, errlog, calls, rounds))
        tier2_s = asyncio.run(_tier2_startup(home))
    rounds_measured: Rounds = measured["rounds"]
    gated_us = rounds_measured.median("subject") * 1e6
    direct_us = rounds_measured.median("floor") * 1e6
    ratio = round(rounds_measured.ratio, 3)
    limit = round(1.3 + max(gate_overhead_us, 0.0) / direct_us, 3)
    figures: dict[str, Any] = {
        "calls_per_round": calls,
        "rounds": rounds,
        "gated_call_us": round(gated_us, 1),
        "direct_sdk_call_us": round(direct_us, 1),
        **rounds_measured.figures("direct_us", "gated_us", scale=1e6, digits=1),
        "gated_over_direct": ratio,
        "tier1_startup_ms": round(measured["tier1_startup_s"] * 1000, 1),
        "tier2_startup_ms": None if tier2_s is None else round(tier2_s * 1000, 1),
    }
    targets: dict[str, Any] = {
        "mcp_source_call_over_direct_sdk": {"value": ratio, "limit": limit, "better": "lower"}
    }
    if tier2_s is not None:
        targets["mcp_source_tier2_startup_ms"] = {
            "value": figures["tier2_startup_ms"],
            "limit": 5000,
            "better": "lower",
        }
    return figures, targets


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    figures = asyncio.run(in_process(args.calls, args.rounds))
    mcp_figures, mcp_targets = mcp_round_trip(args.calls)
    source_figures, source_targets = mcp_source_figures(
        max(50, args.calls // 50), args.rounds, figures["call_overhead_us"]
    )
    report = {
        "benchmark": "registry",
        "in_process": figures,
        "mcp": mcp_figures,
        "mcp_source": source_figures,
        "targets": {
            "call_over_bare_validation": {
                "value": figures["call_over_bare_validation"],
                "limit": 2.5,
                "better": "lower",
            },
            **mcp_targets,
            **source_targets,
        },
    }
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    benchmark_main(main)
