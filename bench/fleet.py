"""Benchmark: a fleet of simulated cells behind one registry, and one cell across two daemons.

Two parts, each measured with its compared configurations interleaved in rounds (the order
rotates every round, ratios are taken within a round and their median reported), so one
noisy moment cannot decide a ratio:

* **fleet**: 4 copies of the pick-place skill (``cell-1`` .. ``cell-4``, cameras slowed to
  ``--fleet-camera-hz``) started by the Skill Runtime in one PAOS home, each with its own
  Gateway on a free port, behind one ``doraforge serve``. ``--clients`` concurrent clients
  call ``forge.tool_query`` (``world.scene_state``, which reads physics and never renders)
  through the registry's ``POST /api/tools/call``, spread round-robin over the first 1, 2
  or 4 cells. All four cells run throughout: a configuration is which cells the clients
  address. Target: throughput with ``n`` cells at least ``1 + 0.8 (k - 1)`` times the
  1-cell throughput, ``k = min(n, os.cpu_count())``: cells are processes, so they add
  throughput only while a core is free for them (on 2 cores the 4-cell target is the
  2-cell one).
* **across daemons**: ``dataflows/sim.yml`` under one ``dora run`` beside
  ``dataflows/sim-split.yml`` on a coordinator and two loopback daemons (``robot``: world,
  arm, gripper; ``workstation``: Gateway, camera), both running at once. The same
  ``world.scene_state`` Query straight to each Gateway, sequential, alternating cells per
  round; then every camera frame the world publishes (``--camera-hz``), seen at each
  Gateway through ``GET /observations/images`` (metadata only, polled): its transit from
  render (the world's ``stamp_ns``) to the Gateway's receipt (``received_ns``), and the
  frames lost on the way, counted by gaps in each camera's sequence numbers (Dora 1.1
  sends outputs to another daemon with Zenoh congestion control DROP).

The last line printed is one JSON object (raw figures plus ``targets``). Killed by SIGTERM or
a timeout, it stops every skill, daemon, dataflow and server it started.

    python bench/fleet.py [--rounds 5] [--clients 8] [--seconds 5] [--queries 1000]
    python bench/fleet.py --quick
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import json
import os
import secrets
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.sim import wait_ready
from bench.support import (
    Rounds,
    benchmark_main,
    concurrent_calls,
    rotations,
    run,
    sequential_latencies,
    summary,
    sweep_processes,
    wait_http,
)
from doraforge.dataflows import DATAFLOWS
from doraforge.paos.errors import PaosError
from doraforge.paos.gateway_auth import bearer, dataflow_auth, http_client
from doraforge.paos.home import PaosHome
from doraforge.skill_runtime.archive import pack
from doraforge.skill_runtime.cluster import (
    ClusterDataflow,
    LocalCluster,
    machine_ids,
    with_working_dirs,
)
from doraforge.skill_runtime.dora_run import (
    Dataflow,
    dora_environment,
    free_port,
    private_copy,
)
from doraforge.skill_runtime.installer import Installer
from doraforge.skill_runtime.runtime import RuntimeManager

ROOT = Path(__file__).resolve().parents[1]
SKILL_SOURCE = ROOT / "skills" / "pick-place"
CELL_COUNTS = (1, 2, 4)
QUERY_TOOL = "world.scene_state"
QUERY_PATH = "/tools/world/scene_state:invoke"
QUERY_BODY: dict[str, Any] = {"arguments": {}}
TOKEN_ENV = "DORAFORGE_FLEET_BENCH_TOKEN"
#: Cross-daemon budgets against the single-daemon cell measured in the same run: a Query is
#: two small messages over Zenoh TCP; a 0.9 MB frame crosses in 15 fragments.
QUERY_RATIO_LIMIT = 1.5
FRAME_RATIO_LIMIT = 2.0
LINEAR_SHARE = 0.8


# ------------------------------------------------------------------ the fleet


def skill_copy(name: str, workdir: Path) -> Path:
    """The pick-place skill packed under ``name``, as a user copies a skill to run it twice."""
    folder = workdir / "sources" / name
    shutil.copytree(SKILL_SOURCE, folder, ignore=shutil.ignore_patterns("__pycache__"))
    manifest = folder / "skill.yaml"
    text = manifest.read_text(encoding="utf-8")
    if "\nname: pick-place\n" not in text:
        raise RuntimeError(f"BENCH_SKILL_CHANGED: {manifest} no longer names the skill pick-place")
    manifest.write_text(text.replace("\nname: pick-place\n", f"\nname: {name}\n"), "utf-8")
    return pack(folder, workdir / f"{name}.tar.gz").path


@contextlib.contextmanager
def fleet(workdir: Path, cells: int, camera_hz: float) -> Iterator[tuple[PaosHome, list[str]]]:
    """``cells`` running copies of the skill in one PAOS home; all stopped on the way out."""
    home = PaosHome(workdir / "home")
    environ = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "DORAFORGE_SIM_CAMERA_HZ": str(camera_hz),
    }
    names = [f"cell-{index}" for index in range(1, cells + 1)]
    for name in names:
        Installer(home).install(str(skill_copy(name, workdir)), yes=True)
    try:
        start_cells(home, names, environ, workdir)
        yield home, names
    finally:
        runtime = RuntimeManager(home, environ=environ)
        for name in reversed(names):
            state = runtime.status(name)
            if state is not None and state.live:
                with contextlib.suppress(Exception):  # stop them all, whatever one says
                    runtime.stop(name, force=True)


def start_cells(
    home: PaosHome, names: Sequence[str], environ: dict[str, str], workdir: Path
) -> None:
    """``doraforge skill start NAME --port N`` for every cell, as an operator starts them,
    at most one per core at a time (each mostly waits for its world to build and register;
    four `dora start`s at once on a loaded 2-core machine overran Dora's 30 s answer time).

    Each command runs in a session of its own and is stopped (SIGTERM, then SIGKILL) when
    this returns early; what a stopped start leaves running is stopped by :func:`fleet`
    or swept with the benchmark's folder."""
    command = doraforge_command()
    workers = min(len(names), os.cpu_count() or 1)
    pending = list(names)
    running: dict[str, subprocess.Popen[bytes]] = {}
    print(f"  starting {', '.join(names)}, {workers} at a time ...", flush=True)
    try:
        while pending or running:
            while pending and len(running) < workers:
                name = pending.pop(0)
                start = [*command, "--home", str(home.root), "skill", "start", name]
                start += ["--profile", "sim", "--port", str(free_port())]
                with (workdir / f"start-{name}.log").open("wb") as log:
                    running[name] = subprocess.Popen(
                        start,
                        env=environ,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,
                    )
            for name, process in list(running.items()):
                if process.poll() is not None:
                    del running[name]
                    _started(name, process.returncode, workdir)
            time.sleep(0.1)
    finally:
        for process in running.values():
            _stop_group(process)


def _started(name: str, returncode: int, workdir: Path) -> None:
    if returncode != 0:
        lines = (workdir / f"start-{name}.log").read_text(errors="replace").strip().splitlines()
        raise RuntimeError(
            f"BENCH_CELL_START_FAILED: {name} did not start ({lines[-1] if lines else returncode})"
        )
    print(f"  {name}: running", flush=True)


@contextlib.contextmanager
def registry(home: PaosHome, workdir: Path) -> Iterator[tuple[str, str]]:
    """``doraforge serve`` over ``home`` on a free port with a bearer token: (URL, token)."""
    token = secrets.token_urlsafe(32)
    port = free_port()
    command = [*doraforge_command(), "--home", str(home.root), "serve", "--port", str(port)]
    command += ["--grant", "robot.read", "--token-env", TOKEN_ENV]
    with (workdir / "serve.log").open("wb") as log:
        server = subprocess.Popen(
            command,
            env={**os.environ, TOKEN_ENV: token},
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        base = f"http://127.0.0.1:{port}"
        wait_http(f"{base}/api/tools", 60, "registry", headers=bearer(token))
        yield base, token
    finally:
        _stop_group(server)


def doraforge_command() -> list[str]:
    """The ``doraforge`` command installed beside this interpreter."""
    return [shutil.which("doraforge", path=str(Path(sys.executable).parent)) or "doraforge"]


def _stop_group(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the process's group, SIGKILL after 10 s."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def call_body(skill: str, request_id: str) -> dict[str, Any]:
    """One ``portos_tool_call`` of the read-only Query on ``skill``'s Gateway."""
    return {
        "type": "portos_tool_call",
        "requestId": request_id,
        "name": "forge.tool_query",
        "arguments": {"skill": skill, "tool_id": QUERY_TOOL, "arguments": {}},
    }


def wait_queries(base: str, token: str, names: Sequence[str]) -> None:
    """Until every cell's world answers the Query through the registry (it registers before
    its first physics step, and answers a retryable WORLD_NOT_READY until then)."""
    with httpx.Client(base_url=base, headers=bearer(token), timeout=30) as client:
        for name in names:
            deadline = time.monotonic() + 120
            while True:
                body = call_body(name, f"ready-{name}-{time.monotonic_ns()}")
                answer = client.post("/api/tools/call", json=body).json()
                if answer.get("state") == "completed":
                    break
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{name} never answered {QUERY_TOOL}: {answer}")
                time.sleep(0.2)


def fleet_round(
    base: str, token: str, names: Sequence[str], cells: int, clients: int, seconds: float, tag: str
) -> dict[str, Any]:
    """Queries for ``seconds`` from ``clients`` concurrent clients over the first ``cells``
    cells, each client's calls going to the cells in turn."""

    def body(client: int, index: int) -> dict[str, Any]:
        skill = names[(client + index) % cells]
        return call_body(skill, f"{tag}-{client}-{index}")

    figures: dict[str, Any] = run(
        concurrent_calls(
            base,
            "/api/tools/call",
            body,
            clients,
            seconds,
            headers=bearer(token),
            accept=lambda answer: answer.get("state") == "completed",
        )
    )
    return figures


def measure_fleet(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    """Throughput and latency per cell count, the counts interleaved in rounds."""
    largest = max(CELL_COUNTS)
    with contextlib.ExitStack() as stack:
        home, names = stack.enter_context(fleet(workdir, largest, args.fleet_camera_hz))
        base, token = stack.enter_context(registry(home, workdir))
        wait_queries(base, token, names)
        for cells in CELL_COUNTS:  # warm every path once, untimed
            fleet_round(base, token, names, cells, args.clients, 1.0, "warm")

        def measure(cells: int, index: int) -> dict[str, Any]:
            tag = f"r{index}-c{cells}"
            return fleet_round(base, token, names, cells, args.clients, args.seconds, tag)

        def show(index: int, cells: int, figures: dict[str, Any]) -> None:
            print(f"  round {index + 1}, {cells} cell(s): {figures['qps']}/s", flush=True)

        rounds = rotations(CELL_COUNTS, args.rounds, measure, show=show)
    return fleet_figures(rounds, args.clients)


def fleet_figures(rounds: list[dict[int, dict[str, Any]]], clients: int) -> dict[str, Any]:
    """Per cell count: median throughput, pooled latency; per-round scaling ratios (the
    ``n``-cell throughput over the 1-cell one of the same round)."""
    figures: dict[str, Any] = {"clients": clients, "rounds": len(rounds), "by_cells": {}}
    one_cell = tuple(float(round_[1]["qps"]) for round_ in rounds)
    for cells in CELL_COUNTS:
        samples = [s for round_ in rounds for s in round_[cells]["latencies_s"]]
        qps = [round_[cells]["qps"] for round_ in rounds]
        scaling = Rounds(floor=one_cell, subject=tuple(float(q) for q in qps))
        figures["by_cells"][str(cells)] = {
            "qps_median": round(statistics.median(qps), 1),
            "qps_rounds": qps,
            "failures": sum(round_[cells]["failures"] for round_ in rounds),
            "latency": summary(samples),
            "over_1_cell_rounds": [round(r, 3) for r in scaling.ratios],
            "over_1_cell": round(scaling.ratio, 3),
        }
    return figures


# ------------------------------------------------------------------ across daemons


@contextlib.contextmanager
def single_cell(workdir: Path, env: dict[str, str]) -> Iterator[str]:
    """``dataflows/sim.yml`` under one ``dora run``; yields its Gateway URL."""
    run_dir = workdir / "single"
    run_dir.mkdir(parents=True)
    port = free_port()
    cell_env = _cell_env(env, port, run_dir)
    with (
        (run_dir / "dora.log").open("wb") as log,
        Dataflow(private_copy(DATAFLOWS / "sim.yml", run_dir), cell_env, log),
    ):
        yield f"http://127.0.0.1:{port}"


@contextlib.contextmanager
def split_cell(workdir: Path, env: dict[str, str]) -> Iterator[str]:
    """``dataflows/sim-split.yml`` on a coordinator and one daemon per machine id."""
    run_dir = workdir / "split"
    run_dir.mkdir(parents=True)
    copy = private_copy(DATAFLOWS / "sim-split.yml", run_dir)
    pinned = with_working_dirs(copy, run_dir / "sim-split.cluster.yml")
    port = free_port()
    cell_env = _cell_env(env, port, run_dir)
    cluster = LocalCluster(machine_ids(copy), cell_env, run_dir / "cluster")
    with (
        (run_dir / "dora-start.log").open("wb") as log,
        ClusterDataflow(pinned, cell_env, log, cluster=cluster),
    ):
        yield f"http://127.0.0.1:{port}"


def _cell_env(env: dict[str, str], port: int, run_dir: Path) -> dict[str, str]:
    return {
        **env,
        "DORAFORGE_GATEWAY_PORT": str(port),
        "DORAFORGE_GATEWAY_JOURNAL": str(run_dir / "gateway.journal"),
    }


def measure_daemons(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    """Query latency and camera frames of the one-daemon and the split cell, side by side."""
    with dataflow_auth(os.environ, generate=True) as auth:
        env = dora_environment(
            auth.environment(os.environ),
            DORAFORGE_SIM_CAMERA_HZ=str(args.camera_hz),
            DORAFORGE_LOG_LEVEL="WARNING",
        )
        with split_cell(workdir, env) as split_url, single_cell(workdir, env) as single_url:
            urls = {"single_daemon": single_url, "cross_daemon": split_url}
            clients = {
                name: http_client(url, auth.token, timeout_s=30) for name, url in urls.items()
            }
            with contextlib.ExitStack() as stack:
                for client in clients.values():
                    stack.enter_context(client)
                for name, url in urls.items():
                    wait_http(f"{url}/tools", 120, name, headers=bearer(auth.token))
                    wait_ready(clients[name])
                queries = query_rounds(clients, args.rounds, args.queries)
                frames = frame_rounds(clients, args.rounds, args.frame_seconds)
    return {"camera_hz": args.camera_hz, "queries": queries, "frames": frames}


def query_rounds(clients: dict[str, httpx.Client], rounds: int, queries: int) -> dict[str, Any]:
    """Sequential Queries to each cell, the cells alternating per round."""
    per_round = max(1, queries // rounds)
    samples: dict[str, list[float]] = {name: [] for name in clients}
    for client in clients.values():
        sequential_latencies(client, QUERY_PATH, QUERY_BODY, 50)  # warm, untimed

    def measure(name: str, _index: int) -> float:
        taken = sequential_latencies(clients[name], QUERY_PATH, QUERY_BODY, per_round)
        samples[name] += taken
        return statistics.median(taken)

    measured = rotations(list(clients), rounds, measure)
    p50 = Rounds(
        floor=tuple(round_["single_daemon"] for round_ in measured),
        subject=tuple(round_["cross_daemon"] for round_ in measured),
    )
    for index, ratio in enumerate(p50.ratios):
        print(f"  round {index + 1}: Query p50 cross/single {ratio:.3f}", flush=True)
    return {
        **{name: summary(taken) for name, taken in samples.items()},
        "cross_over_single_p50_rounds": [round(r, 3) for r in p50.ratios],
        "cross_over_single_p50": round(p50.ratio, 3),
    }


def frame_rounds(clients: dict[str, httpx.Client], rounds: int, seconds: float) -> dict[str, Any]:
    """Every frame each Gateway receives, both watched at the same time (one poller thread
    each), ``seconds`` in all; the transit ratio is taken per round."""
    seen: dict[str, dict[tuple[str, int], int]] = {name: {} for name in clients}
    gaps: dict[str, list[float]] = {name: [] for name in clients}
    ratios = []
    for _ in range(rounds):
        before = {name: set(frames) for name, frames in seen.items()}
        deadline = time.monotonic() + seconds / rounds
        with concurrent.futures.ThreadPoolExecutor(len(clients)) as pool:
            polls = {
                name: pool.submit(watch_frames, clients[name], seen[name], deadline)
                for name in clients
            }
            for name, poll in polls.items():
                gaps[name].append(poll.result())
        new = {name: [seen[name][k] for k in seen[name].keys() - before[name]] for name in seen}
        if all(new.values()):
            cross, single = new["cross_daemon"], new["single_daemon"]
            ratios.append(statistics.median(cross) / statistics.median(single))
    figures: dict[str, Any] = {}
    for name, frames in seen.items():
        figures[name] = {
            "transit": summary([ns / 1e9 for ns in frames.values()]),
            "frames_seen": len(frames),
            "frames_dropped": dropped(frames),
            "poll_interval_max_ms": round(1000 * max(gaps[name], default=0.0), 2),
        }
    figures["cross_over_single_transit_p50_rounds"] = [round(r, 3) for r in ratios]
    figures["cross_over_single_transit_p50"] = round(statistics.median(ratios), 3)
    return figures


def watch_frames(client: httpx.Client, seen: dict[tuple[str, int], int], deadline: float) -> float:
    """Poll ``client``'s Gateway until ``deadline``; returns the longest pause between two
    polls: the poller can miss a frame only across a pause longer than the world's frame
    spacing, so a reader can tell such a miss from a drop."""
    last = time.monotonic()
    longest = 0.0
    while last < deadline:
        observe_frames(client, seen)
        now = time.monotonic()
        longest, last = max(longest, now - last), now
    return longest


def observe_frames(client: httpx.Client, seen: dict[tuple[str, int], int]) -> None:
    """Record each camera's newest frame: ``(source, seq)`` -> render-to-receipt ns."""
    sources = client.get("/observations/images").json()["data"]["sources"]
    for source in sources:
        latest = source["latest"]
        if latest is not None:
            key = (source["source"], int(latest["seq"]))
            seen.setdefault(key, int(latest["received_ns"]) - int(latest["stamp_ns"]))


def dropped(frames: dict[tuple[str, int], int]) -> int:
    """Frames missing between the first and the last one seen, per camera."""
    by_source: dict[str, list[int]] = {}
    for source, seq in frames:
        by_source.setdefault(source, []).append(seq)
    return sum(max(seqs) - min(seqs) + 1 - len(seqs) for seqs in by_source.values())


# ------------------------------------------------------------------ report


def targets(fleet_: dict[str, Any], daemons: dict[str, Any], cpus: int) -> dict[str, Any]:
    """The scaling targets (bounded by ``cpus``) and the cross-daemon budgets."""
    found: dict[str, Any] = {}
    for cells in CELL_COUNTS[1:]:
        effective = min(cells, cpus)
        found[f"fleet.qps_{cells}_cells_over_1"] = {
            "value": fleet_["by_cells"][str(cells)]["over_1_cell"],
            "limit": round(1 + LINEAR_SHARE * (effective - 1), 3),
            "better": "higher",
        }
    found["cross_daemon.query_p50_over_single"] = {
        "value": daemons["queries"]["cross_over_single_p50"],
        "limit": QUERY_RATIO_LIMIT,
        "better": "lower",
    }
    found["cross_daemon.frame_transit_p50_over_single"] = {
        "value": daemons["frames"]["cross_over_single_transit_p50"],
        "limit": FRAME_RATIO_LIMIT,
        "better": "lower",
    }
    found["cross_daemon.frames_dropped"] = {
        "value": daemons["frames"]["cross_daemon"]["frames_dropped"],
        "limit": 0,
        "better": "lower",
    }
    return found


def parse(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--clients", type=int, default=8, help="concurrent registry clients")
    parser.add_argument(
        "--seconds", type=float, default=5.0, help="registry load per round and cell count"
    )
    parser.add_argument("--queries", type=int, default=1000, help="Queries per cell, all rounds")
    parser.add_argument("--frame-seconds", type=float, default=30.0, help="all rounds")
    parser.add_argument("--camera-hz", type=float, default=5.0, help="across-daemons part")
    parser.add_argument("--fleet-camera-hz", type=float, default=0.5, help="fleet part")
    parser.add_argument("--quick", action="store_true", help="smallest sizes (the e2e test)")
    args = parser.parse_args(argv)
    if args.quick:
        args.rounds, args.clients, args.seconds, args.queries = 1, 4, 1.0, 30
        args.frame_seconds = 2.0
    return args


def main() -> int:
    """Both parts, then the JSON line. Run under :func:`benchmark_main`: killed by
    ``timeout`` or a CI runner, the skills, daemons and servers still stop."""
    args = parse()
    cpus = os.cpu_count() or 1
    with tempfile.TemporaryDirectory(prefix="doraforge-bench-fleet-") as tmp:
        workdir = Path(tmp)
        try:
            print(f"fleet: {max(CELL_COUNTS)} cells behind one registry ...", flush=True)
            fleet_ = measure_fleet(args, workdir / "fleet")
            print("across daemons: one-daemon cell beside the split cell ...", flush=True)
            daemons = measure_daemons(args, workdir / "daemons")
        finally:
            # The last resort: anything of the run still alive (should be nothing).
            for command in sweep_processes(workdir):
                print(f"  killed a leftover process: {command[:160]}", flush=True)
    report = {
        "benchmark": "fleet",
        "cpu_count": cpus,
        "scaling_bound": f"k = min(cells, os.cpu_count()={cpus}); limit 1 + 0.8 (k - 1)",
        "fleet": fleet_,
        "across_daemons": daemons,
        "targets": targets(fleet_, daemons, cpus),
    }
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    try:
        benchmark_main(main)  # SIGTERM unwinds like Ctrl-C; leftovers below it are stopped
    except PaosError as exc:  # a cell or the registry did not come up: one line, its code
        sys.exit(f"{exc.code}: {exc.message} (the benchmark stopped what it started)")
    except TimeoutError as exc:
        sys.exit(f"BENCH_TIMEOUT: {exc}; rerun on a quieter machine")
    except RuntimeError as exc:  # already "CODE: message"
        sys.exit(str(exc))
