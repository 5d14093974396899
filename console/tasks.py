"""The Tasks routes: the recent AgentTasks, one task's story, its frames and its bundle.

A task's story is the store's own description (task, binding, revisions with verdicts,
records, every evidence artifact in capture order, verification attempts). Evidence bytes
are served only for an artifact the store lists for that task, read through the
workspace-containment check and compared with the recorded SHA-256, so a swapped or
truncated file is refused rather than shown as evidence.
"""

from __future__ import annotations

import hashlib
import io
import json
import zipfile
from pathlib import Path
from typing import Any

from fastapi.responses import JSONResponse, Response
from starlette.requests import Request

from doraforge.console.errors import translated
from doraforge.console.params import checked_id, only_params, query_int
from doraforge.console.state import console_of
from doraforge.paos.errors import PaosError
from doraforge.paos.evidence import contained
from doraforge.registry.errors import NotFound, Unprocessable

MAX_TASKS = 200
_EXTENSIONS = {"image/png": "png", "image/jpeg": "jpg"}


def _service(request: Request) -> Any:
    try:
        return console_of(request).robot.task_service()
    except PaosError as exc:
        raise translated(exc) from exc


def _describe(request: Request, task_id: str) -> dict[str, Any]:
    checked_id(task_id, "task_id")
    try:
        described: dict[str, Any] = _service(request).describe(task_id)
    except PaosError as exc:
        raise translated(exc) from exc
    return described


async def tasks(request: Request) -> JSONResponse:
    only_params(request, ("limit",))
    limit = query_int(request, "limit", 50, 1, MAX_TASKS)
    try:
        rows = [t.public() for t in _service(request).store.tasks(limit)]
    except PaosError as exc:
        raise translated(exc) from exc
    return JSONResponse({"ok": True, "tasks": rows})


async def task(task_id: str, request: Request) -> JSONResponse:
    return JSONResponse({"ok": True, **_describe(request, task_id)})


def _frame_bytes(workspace: Path, artifact: dict[str, Any]) -> bytes:
    """The artifact's bytes when they are still what was recorded."""
    where = {"artifact_id": artifact["artifact_id"]}
    if artifact.get("error") is not None or not artifact.get("path"):
        raise NotFound(
            "CONSOLE_EVIDENCE_NOT_CAPTURED", "this frame was not captured", details=where
        )
    try:
        data = contained(workspace, artifact["path"]).read_bytes()
    except (OSError, ValueError) as exc:
        raise Unprocessable(
            "CONSOLE_EVIDENCE_UNREADABLE", "the frame's file cannot be read", details=where
        ) from exc
    if hashlib.sha256(data).hexdigest() != artifact.get("sha256"):
        raise Unprocessable(
            "CONSOLE_EVIDENCE_MODIFIED",
            "the frame's file no longer matches its recorded SHA-256",
            details=where,
        )
    return data


async def evidence(task_id: str, artifact_id: str, request: Request) -> Response:
    checked_id(artifact_id, "artifact_id")
    described = _describe(request, task_id)
    artifact = next((a for a in described["evidence"] if a["artifact_id"] == artifact_id), None)
    if artifact is None:
        raise NotFound(
            "CONSOLE_EVIDENCE_NOT_FOUND",
            f"task {task_id!r} has no evidence {artifact_id!r}",
            details={"task_id": task_id, "artifact_id": artifact_id},
        )
    data = _frame_bytes(_service(request).workspace, artifact)
    headers = {"Cache-Control": "private, max-age=3600"}
    return Response(data, media_type=artifact["media_type"], headers=headers)


def _bundle(workspace: Path, described: dict[str, Any]) -> bytes:
    """``task.json`` (the whole story) and every captured frame, in capture order."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("task.json", json.dumps(described, indent=2, ensure_ascii=False))
        for index, artifact in enumerate(described["evidence"]):
            if artifact.get("error") is not None or not artifact.get("path"):
                continue
            extension = _EXTENSIONS.get(artifact.get("media_type", ""), "bin")
            name = f"evidence/{index:03d}-{artifact['phase']}-{artifact['source']}.{extension}"
            archive.writestr(name, _frame_bytes(workspace, artifact))
    return buffer.getvalue()


async def bundle(task_id: str, request: Request) -> Response:
    """The evidence bundle as a zip download."""
    described = _describe(request, task_id)
    data = _bundle(_service(request).workspace, described)
    disposition = f'attachment; filename="{task_id}-evidence.zip"'
    return Response(
        data, media_type="application/zip", headers={"Content-Disposition": disposition}
    )
