"""The evidence scope over a real SQLite task store: one item per artifact with its
source, phase, sequence, time, size, SHA-256 and media type, never bytes or the path."""

from __future__ import annotations

from pathlib import Path

import pytest

from doraforge.paos.home import PaosHome
from doraforge.registry.context.scopes import EvidenceSource
from doraforge.registry.context.source import opaque_ref
from tests.registry.context.scope_support import (
    EVIDENCE_PATH_PART,
    RUNTIME_INSTANCE,
    leaks,
    recorded_tasks,
)

pytestmark = pytest.mark.anyio


@pytest.fixture
def home(tmp_path: Path) -> PaosHome:
    return PaosHome(tmp_path / "home")


async def test_each_artifact_is_its_frame_identity_and_its_task_reference(
    home: PaosHome, tmp_path: Path
) -> None:
    (task_id,) = recorded_tasks(home, 1, frames=3)
    snapshot = await EvidenceSource(home).snapshot()
    assert snapshot.status == "fresh"
    assert not snapshot.source_truncated
    before, after, failed = snapshot.items
    assert before.ref == opaque_ref("evidence", f"ev-{task_id}-0")
    assert before.kind == "frame"
    assert before.label == "scene before #100"
    assert before.route == "/console/#/tasks"
    assert dict(before.metadata) == {
        "source": "scene",
        "phase": "before",
        "sequence": 100,
        "captured_at": "2025-11-24T16:00:00.000+00:00",
        "size": 2048,
        "width": 64,
        "height": 48,
        "sha256": "0" * 64,
        "media_type": "image/png",
        "task": opaque_ref("tasks", task_id),
        "skill": "pick-place",
        "runtime_instance_id": RUNTIME_INSTANCE,
        "captured": True,
        "error_code": None,
    }
    assert after.metadata["phase"] == "after"
    assert after.metadata["sequence"] == 101
    assert failed.label == "scene after failed: EVIDENCE_WRITE_FAILED"
    assert failed.metadata["captured"] is False
    assert failed.metadata["sha256"] is None
    # Neither the workspace path, nor the failure's message (it quotes the store's path).
    assert not leaks(snapshot, EVIDENCE_PATH_PART, task_id, str(tmp_path), "disk full")


async def test_references_are_stable_across_snapshots(home: PaosHome) -> None:
    recorded_tasks(home, 2)
    source = EvidenceSource(home)
    first, second = await source.snapshot(), await source.snapshot()
    assert [i.ref for i in first.items] == [i.ref for i in second.items]
    assert len({i.ref for i in first.items}) == 4


async def test_the_scan_cap_bounds_the_artifacts_and_says_more_exist(home: PaosHome) -> None:
    recorded_tasks(home, 2, frames=2)  # four artifacts over two tasks
    capped = await EvidenceSource(home).snapshot(limit=3)
    assert len(capped.items) == 3
    assert capped.source_truncated
    whole = await EvidenceSource(home).snapshot(limit=4)
    assert len(whole.items) == 4
    assert not whole.source_truncated


async def test_tasks_past_the_cap_count_as_unread_even_without_evidence(home: PaosHome) -> None:
    recorded_tasks(home, 3, frames=0)
    snapshot = await EvidenceSource(home).snapshot(limit=2)
    assert snapshot.items == ()
    assert snapshot.source_truncated


async def test_a_home_without_a_store_has_no_evidence(home: PaosHome) -> None:
    snapshot = await EvidenceSource(home).snapshot()
    assert snapshot.items == ()
    assert not snapshot.source_truncated
