"""The ``evidence`` scope: the evidence index of the task store, one item per artifact.

Each item: the frame's source, phase, sequence number, capture time, size, dimensions,
SHA-256 and media type, its task's opaque reference and cell (skill and runtime
instance of the task's binding); a failed capture carries its
error code only. Never the bytes and never the workspace path (nor a failure's message,
which may quote one). Tasks are walked newest first, each task's artifacts in capture
order; both the tasks walked and the artifacts kept are bounded by the scan cap.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from doraforge.paos.home import PaosHome
from doraforge.paos.store import AgentTaskStore
from doraforge.registry.context.scopes._common import HomeSource, bounded, iso_ns, task_store
from doraforge.registry.context.scopes.tasks import ROUTE, cell_of, task_ref
from doraforge.registry.context.source import (
    ContextItem,
    Scalar,
    Snapshot,
    opaque_ref,
)


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _error_code(artifact: Mapping[str, Any]) -> str | None:
    error = artifact.get("error")
    return _str(error.get("code")) if isinstance(error, Mapping) else None


type Cell = tuple[str | None, str | None]


def _item(artifact: Mapping[str, Any], cell: Cell = (None, None)) -> ContextItem:
    source, phase = _str(artifact.get("source")), _str(artifact.get("phase"))
    seq = _int(artifact.get("seq"))
    code = _error_code(artifact)
    metadata: dict[str, Scalar] = {
        "source": source,
        "phase": phase,
        "sequence": seq,
        "captured_at": iso_ns(_int(artifact.get("captured_at_ns"))),
        "size": _int(artifact.get("size")),
        "width": _int(artifact.get("width")),
        "height": _int(artifact.get("height")),
        "sha256": _str(artifact.get("sha256")),
        "media_type": _str(artifact.get("media_type")),
        "task": task_ref(str(artifact.get("task_id"))),
        "skill": cell[0],
        "runtime_instance_id": cell[1],
        "captured": code is None,
        "error_code": code,
    }
    frame = f"#{seq}" if seq is not None else "(no frame)"
    outcome = f"failed: {code}" if code is not None else frame
    return ContextItem(
        ref=opaque_ref("evidence", str(artifact.get("artifact_id"))),
        scope="evidence",
        kind="frame",
        label=f"{source} {phase} {outcome}",
        route=ROUTE,
        metadata=metadata,
        text=f"{source} {phase} evidence frame",
    )


def _artifacts(store: AgentTaskStore, task_ids: list[str]) -> Iterator[Mapping[str, Any]]:
    for task_id in task_ids:
        yield from store.evidence(task_id)


def _read(home: PaosHome, limit: int) -> Snapshot:
    with task_store(home, "evidence") as store:
        if store is None:
            return Snapshot(())
        tasks = store.tasks(limit + 1)
        walked = [task.task_id for task in tasks[:limit]]
        cells: dict[str, Cell] = {}
        for task in tasks[:limit]:
            skill, _version, instance = cell_of(store, task.binding_id)
            cells[task.task_id] = (skill, instance)
        kept, more = bounded(_artifacts(store, walked), limit)
        items = tuple(_item(a, cells.get(str(a.get("task_id")), (None, None))) for a in kept)
    return Snapshot(items, source_truncated=more or len(tasks) > limit)


class EvidenceSource(HomeSource):
    """The evidence scope of ``home``'s task store; raises :class:`SourceError`
    ``CONTEXT_STORE_UNAVAILABLE`` when the store cannot be read."""

    scope_name = "evidence"

    def read(self, limit: int) -> Snapshot:
        return _read(self._home, limit)
