"""Benchmark: the PAOS AgentTask store, finalize, and evidence capture.

Measured in one run, on real files in a temporary directory:
  * bound Action accounting: the store's ``record_intent`` + ``record_admitted`` +
    ``record_terminal`` (three ``BEGIN IMMEDIATE`` transactions per Action, as the task
    coordinator does them) beside a raw ``sqlite3`` floor with the same durability
    settings doing three single-row INSERT/UPDATE transactions per Action on a minimal
    table; rounds alternate (floor, store, floor, store ...) and the target is the median
    of the per-round ratios;
  * ``paos.finalize.finalize`` (mode ``off``) of a task whose current revision holds 1,000
    terminal Action records, each repetition on a fresh task; the Gateway client behind it
    must never be called (a ``MockTransport`` that counts calls);
  * evidence capture, request -> verified file on disk, against a real in-process Gateway
    with a camera source of 480x640 frames (phase ``before``: fetch + PNG decode + hash +
    atomic, fsynced write); a fresh frame is published before each capture, so the
    Gateway's PNG encode is inside the figure, and a second figure re-reads the same frame
    (its encoding cached by the Gateway).
The last line printed is one JSON object.

    python bench/paos_store.py [--actions 2000] [--rounds 9] [--records 1000]
                               [--finalize-reps 5] [--captures 100]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from forge_msgs import Image

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.support import benchmark_main, interleave, summary
from doraforge.gateway.config import ImageSource, ObservationsConfig, load_config
from doraforge.gateway.core import Gateway
from doraforge.gateway.http import create_app
from doraforge.paos.client import ForgeToolClient
from doraforge.paos.evidence import capture
from doraforge.paos.finalize import finalize
from doraforge.paos.store import AgentTaskStore, NewRecord
from doraforge.paos.tasks import TaskService
from doraforge.paos.verify.contract import parse_contract

ROOT = Path(__file__).resolve().parents[1]
MOCK_GATEWAY = ROOT / "dataflows" / "mock.gateway.yml"
UNUSED_URL = "http://127.0.0.1:9"  # discard port: nothing may be sent there
BINDING_ID = "bind_bench"
WARMUP_ACTIONS = 200
RESULT = {
    "status": "succeeded",
    "outputs": {"reached": True, "duration_s": 0.0},
    "error": None,
}
BUSY_TIMEOUT_MS = 10_000  # the store's


# ---------------------------------------------------------------- accounting


def _binding() -> dict[str, Any]:
    return {
        "skill": "bench",
        "version": "1.0.0",
        "profile": "default",
        "manifest_sha256": None,
        "skill_md_sha256": None,
        "runtime_instance": None,
        "node_artifacts": [],
        "gateway_url": UNUSED_URL,
        "gateway_identity": {"instance_id": "bench"},
        "tools": {
            "mock.move": {
                "semantics": "action",
                "endpoint_id": "mock",
                "operation": "move",
                "spec_sha256": "0" * 64,
            }
        },
    }


def _new_store(path: Path) -> AgentTaskStore:
    store = AgentTaskStore(path)
    store.put_binding(BINDING_ID, "0" * 64, _binding())
    return store


def _new_task(store: AgentTaskStore, n: int) -> tuple[str, str]:
    task_id, revision_id = f"task_{n:032x}", f"rev_{n:032x}"
    store.create_task(
        task_id=task_id,
        revision_id=revision_id,
        binding_id=BINDING_ID,
        goal="move the mock",
        contract=parse_contract({"mode": "off", "goal": "move the mock"}).model_dump(mode="json"),
    )
    return task_id, revision_id


def _store_actions(store: AgentTaskStore, task_id: str, revision_id: str, ids: range) -> None:
    """The coordinator's three store calls per bound Action (nothing else)."""
    for n in ids:
        record_id = f"rec_{n:032x}"
        store.record_intent(
            NewRecord(
                record_id=record_id,
                task_id=task_id,
                revision_id=revision_id,
                tool_id="mock.move",
                semantics="action",
                caller_id=f"paos:{task_id}:{n:032x}",
                arguments_sha256="a" * 64,
                spec_sha256="0" * 64,
            )
        )
        store.record_admitted(record_id, f"inv_{n:032x}", f"att_{n:032x}", "accepted")
        store.record_terminal(record_id, "completed", result=RESULT)


def _floor_connection(path: Path) -> sqlite3.Connection:
    db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("PRAGMA synchronous = NORMAL")
    db.execute(
        "CREATE TABLE IF NOT EXISTS actions (record_id TEXT PRIMARY KEY, state TEXT NOT NULL,"
        " invocation_id TEXT, result_json TEXT)"
    )
    return db


def _floor_actions(db: sqlite3.Connection, ids: range) -> None:
    """Three single-row transactions per Action: INSERT, UPDATE, UPDATE."""
    result = json.dumps(RESULT, sort_keys=True, separators=(",", ":"))
    for n in ids:
        record_id = f"rec_{n:032x}"
        db.execute("BEGIN IMMEDIATE")
        db.execute("INSERT INTO actions VALUES (?, 'intent', NULL, NULL)", (record_id,))
        db.execute("COMMIT")
        db.execute("BEGIN IMMEDIATE")
        db.execute(
            "UPDATE actions SET state = 'accepted', invocation_id = ? WHERE record_id = ?",
            (f"inv_{n:032x}", record_id),
        )
        db.execute("COMMIT")
        db.execute("BEGIN IMMEDIATE")
        db.execute(
            "UPDATE actions SET state = 'completed', result_json = ? WHERE record_id = ?",
            (result, record_id),
        )
        db.execute("COMMIT")


def _per_action(run: Callable[[range], None], start: int, count: int) -> float:
    """Seconds per Action of ``run`` over ``count`` fresh ids from ``start``."""
    began = time.perf_counter()
    run(range(start, start + count))
    return (time.perf_counter() - began) / count


def accounting(actions: int, rounds: int, workdir: Path) -> dict[str, Any]:
    store = _new_store(workdir / "accounting.db")
    task_id, revision_id = _new_task(store, 0)
    floor = _floor_connection(workdir / "floor.db")

    def through_store(ids: range) -> None:
        _store_actions(store, task_id, revision_id, ids)

    def through_floor(ids: range) -> None:
        _floor_actions(floor, ids)

    def show(index: int, floor_s: float, store_s: float) -> None:
        print(
            f"  round {index + 1}/{rounds}: floor {1 / floor_s:.0f} Actions/s,"
            f" store {1 / store_s:.0f} Actions/s ({store_s / floor_s:.2f})",
            flush=True,
        )

    try:
        _per_action(through_store, 0, WARMUP_ACTIONS)
        _per_action(through_floor, 0, WARMUP_ACTIONS)
        measured = interleave(
            lambda index: _per_action(through_floor, WARMUP_ACTIONS + index * actions, actions),
            lambda index: _per_action(through_store, WARMUP_ACTIONS + index * actions, actions),
            rounds,
            show=show,
        )
        stored = store.records(task_id)
        if len(stored) != WARMUP_ACTIONS + rounds * actions or any(
            r.state != "completed" for r in stored
        ):
            raise RuntimeError("the store did not account for every Action")
    finally:
        store.close()
        floor.close()
    store_s, floor_s = measured.median("subject"), measured.median("floor")
    return {
        "actions_per_round": actions,
        "rounds": rounds,
        "transactions_per_action": 3,
        "store_actions_per_s": round(1 / store_s, 1),
        "floor_actions_per_s": round(1 / floor_s, 1),
        "store_us_per_action": round(1e6 * store_s, 1),
        "floor_us_per_action": round(1e6 * floor_s, 1),
        **measured.figures("floor_us", "store_us", scale=1e6, digits=1),
        # The median of the per-round ratios (store time ÷ floor time in each round).
        "floor_over_store": round(measured.ratio, 3),
    }


# ---------------------------------------------------------------- finalize


class Forbidden(httpx.MockTransport):
    """A transport that counts (and refuses) every request: finalize must send none."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        super().__init__(self._refuse)

    def _refuse(self, request: httpx.Request) -> httpx.Response:
        self.calls.append(f"{request.method} {request.url}")
        raise AssertionError(f"finalize sent {request.method} {request.url}")


async def _finalize_runs(records: int, reps: int, workdir: Path) -> dict[str, Any]:
    transport = Forbidden()
    store = _new_store(workdir / "finalize.db")
    service = TaskService(
        store,
        lambda url: ForgeToolClient(url, transport=transport),
        workspace=workdir / "workspace",
    )
    samples, build_s = [], []
    try:
        for rep in range(reps):
            task_id, revision_id = _new_task(store, rep + 1)
            began = time.perf_counter()
            first = (rep + 1) * 1_000_000
            _store_actions(store, task_id, revision_id, range(first, first + records))
            build_s.append(time.perf_counter() - began)
            began = time.perf_counter()
            described = await finalize(service, task_id)
            samples.append(time.perf_counter() - began)
            if described["task"]["state"] != "succeeded" or len(described["records"]) != records:
                raise RuntimeError(f"finalize did not succeed: {described['task']}")
            if len(store.episodes("bench", "1.0.0")) != rep + 1:
                raise RuntimeError("finalize recorded no episode")
            print(f"  finalize {rep + 1}/{reps}: {samples[-1] * 1000:.1f} ms", flush=True)
    finally:
        await service.aclose()
        store.close()
    if transport.calls:
        raise RuntimeError(f"finalize called the Gateway: {transport.calls}")
    return {
        "records": records,
        "mode": "off",
        "gateway_calls": len(transport.calls),
        **summary(samples),
        "build_records_s_median": round(statistics.median(build_s), 3),
    }


# ---------------------------------------------------------------- evidence capture


def _scene(rng: np.random.Generator, seq: int) -> np.ndarray:
    """A 480x640 RGB frame with structure (ramps, a moving block) and sensor-like noise."""
    rows = np.arange(480, dtype=np.uint16)[:, None]
    cols = np.arange(640, dtype=np.uint16)[None, :]
    pixels = np.empty((480, 640, 3), dtype=np.uint8)
    pixels[:, :, 0] = (cols * 255 // 639).astype(np.uint8)
    pixels[:, :, 1] = (rows * 255 // 479).astype(np.uint8)
    pixels[:, :, 2] = 96
    x = 40 + (seq * 7) % 480
    pixels[200:300, x : x + 100] = (200, 40, 40)
    noise = rng.integers(-4, 5, pixels.shape, dtype=np.int16)
    return np.clip(pixels.astype(np.int16) + noise, 0, 255).astype(np.uint8)


async def _captures(count: int, workdir: Path) -> dict[str, Any]:
    observations = ObservationsConfig(images=[ImageSource(source="scene", input="image_scene")])
    config = load_config(MOCK_GATEWAY).model_copy(update={"observations": observations})
    gateway = Gateway(config, send=lambda *_: None)
    rng = np.random.default_rng(7)
    frames = [Image.from_numpy(_scene(rng, seq)).to_arrow() for seq in range(8)]
    workspace = workdir / "evidence-workspace"
    transport = httpx.ASGITransport(app=create_app(gateway))
    fresh, cached, sizes = [], [], []
    async with ForgeToolClient("http://127.0.0.1", transport=transport) as client:

        async def timed(seq: int) -> float:
            began = time.perf_counter()
            artifact = await capture(
                client,
                workspace=workspace,
                task_id="task_bench",
                revision_id="rev_bench",
                record_id=None,
                source="scene",
                phase="before",
                not_before_ns=None,
            )
            elapsed = time.perf_counter() - began
            if not artifact.ok or artifact.seq != seq:
                raise RuntimeError(f"capture failed: {artifact.error}")
            data = (workspace / str(artifact.path)).read_bytes()
            if hashlib.sha256(data).hexdigest() != artifact.sha256:
                raise RuntimeError("the retained bytes do not match their hash")
            if (artifact.height, artifact.width) != (480, 640):
                raise RuntimeError(f"unexpected geometry {artifact.height}x{artifact.width}")
            sizes.append(len(data))
            return elapsed

        for seq in range(1, count + 11):
            metadata = {"seq": seq, "stamp_ns": time.time_ns()}
            gateway.observations.on_input("image_scene", frames[seq % len(frames)], metadata)
            first = await timed(seq)
            again = await timed(seq)
            if seq > 10:  # the first ten warm up the app, the decoder and the directory
                fresh.append(first)
                cached.append(again)
    print(f"  capture: fresh-frame p50 {summary(fresh)['p50_ms']} ms", flush=True)
    return {
        "fresh_frame": summary(fresh),
        "cached_frame": summary(cached),
        "frame": "480x640 rgb8, served as PNG",
        "png_bytes_median": int(statistics.median(sizes)),
    }


# ---------------------------------------------------------------- main


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--actions", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--records", type=int, default=1000)
    parser.add_argument("--finalize-reps", type=int, default=5)
    parser.add_argument("--captures", type=int, default=100)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="doraforge-bench-") as tmp:
        workdir = Path(tmp)
        print(f"accounting: {args.rounds} x {args.actions} Actions, store vs floor ...", flush=True)
        counted = accounting(args.actions, args.rounds, workdir)
        print(f"finalize: {args.records} terminal records x {args.finalize_reps} ...", flush=True)
        finalized = asyncio.run(_finalize_runs(args.records, args.finalize_reps, workdir))
        print(f"evidence capture: {args.captures} captures ...", flush=True)
        captured = asyncio.run(_captures(args.captures, workdir))
    report = {
        "benchmark": "paos_store",
        "accounting": counted,
        "finalize": finalized,
        "evidence_capture": captured,
        "targets": {
            "accounting_floor_over_store": {
                "value": counted["floor_over_store"],
                "limit": 2.0,
                "better": "lower",
            },
        },
    }
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    benchmark_main(main)
