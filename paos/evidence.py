"""Before/after image evidence: capture from the Gateway's observations, and bundle checks.

:func:`capture` fetches the newest frame of a camera source, insists (for an ``after``
frame) that it was captured after the Action's terminal time, checks the media type
against the bytes, decodes the geometry, and writes the bytes atomically under
``<workspace>/evidence/<task_id>/``. It never raises for a capture failure: the failure is
an artifact with ``error`` set, so it is recorded rather than hidden.

:func:`validate_bundle` is what runs before a verifier sees the evidence: identity,
required sources, capture window, quality (not blank, not stale) and the retained bytes
re-hashed from disk.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Literal

import cv2
import numpy as np

from doraforge.paos.client import ForgeToolClient, ImageBytes, ImageFormat
from doraforge.paos.errors import ForgeHttpError, PaosError
from doraforge.wire.files import atomic_write_bytes

type Phase = Literal["before", "after"]
type Problem = dict[str, str]

EVIDENCE_DIR = "evidence"
#: Below this pixel standard deviation (0-255 scale) a frame carries no scene: blank.
BLANK_STDDEV = 2.0
#: Pause between reads while waiting for a frame newer than the capture window start.
POLL_INTERVAL_S = 0.02
_MAGIC = {"image/png": b"\x89PNG\r\n\x1a\n", "image/jpeg": b"\xff\xd8\xff"}
_EXTENSION = {"image/png": "png", "image/jpeg": "jpg"}
_PHASES = ("before", "after")


@dataclass(frozen=True)
class EvidenceArtifact:
    """One captured (or failed) evidence frame.

    ``captured_at_ns`` is the frame's capture stamp, ``received_at_ns`` when PAOS received
    the bytes and ``gateway_received_at_ns`` when the Gateway received the frame (all Unix
    ns). ``path`` is workspace-relative POSIX. A failed capture has ``error`` set
    (``{code, message, details}``) and no byte fields; frame fields stay set when a frame
    was seen but refused (e.g. too old). ``step`` is the step the frame was taken around
    (the Action's, as its caller named it: "descend"), ``None`` when none was named.
    """

    artifact_id: str
    task_id: str
    revision_id: str
    record_id: str | None
    source: str
    phase: Phase
    seq: int | None = None
    captured_at_ns: int | None = None
    received_at_ns: int | None = None
    media_type: str | None = None
    width: int | None = None
    height: int | None = None
    size: int | None = None
    sha256: str | None = None
    path: str | None = None
    error: dict[str, Any] | None = None
    gateway_received_at_ns: int | None = None
    step: str | None = None

    @property
    def ok(self) -> bool:
        """Whether the capture succeeded (bytes retained)."""
        return self.error is None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready copy of every field."""
        return asdict(self)

    @classmethod
    def from_dict(cls, value: Mapping[str, Any]) -> EvidenceArtifact:
        """Rebuild an artifact from :meth:`to_dict` output."""
        return cls(**dict(value))


@dataclass(frozen=True)
class BundleReport:
    """The outcome of :func:`validate_bundle`: ``ok`` exactly when there are no problems.

    Each problem is ``{"code", "message"}`` plus ``"artifact_id"`` when one artifact is
    at fault.
    """

    problems: list[Problem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """No problem was found."""
        return not self.problems

    def codes(self) -> set[str]:
        """The distinct problem codes."""
        return {problem["code"] for problem in self.problems}


# ---------------------------------------------------------------- paths


def contained(workspace: Path, relative: str) -> Path:
    """Resolve workspace-relative ``relative`` and prove it stays inside ``workspace``.

    Containment is decided on resolved path components (symlinks followed), never on a
    string prefix. Raises ``ValueError`` for absolute paths, ``..``, NUL or an escape.
    """
    pure = PurePosixPath(relative)
    if not relative or "\x00" in relative or pure.is_absolute() or ".." in pure.parts:
        raise ValueError(f"unsafe evidence path {relative!r}")
    root = workspace.resolve()
    target = (root / pure).resolve()
    if not target.is_relative_to(root):
        raise ValueError(f"evidence path {relative!r} escapes the workspace")
    return target


def _safe_component(value: str, name: str) -> str:
    if not value or value in (".", "..") or "/" in value or "\\" in value or "\x00" in value:
        raise ValueError(f"{name} {value!r} cannot name an evidence directory or file")
    return value


def evidence_path(task_id: str, artifact_id: str, media_type: str) -> str:
    """The workspace-relative POSIX path of an artifact's bytes."""
    task = _safe_component(task_id, "task_id")
    name = _safe_component(artifact_id, "artifact_id")
    return f"{EVIDENCE_DIR}/{task}/{name}.{_EXTENSION[media_type]}"


# ---------------------------------------------------------------- capture


@dataclass(frozen=True)
class _Refused:
    """Why no acceptable frame was obtained, and the last frame seen if any."""

    error: dict[str, Any]
    image: ImageBytes | None = None


async def capture(
    client: ForgeToolClient,
    *,
    workspace: Path,
    task_id: str,
    revision_id: str,
    record_id: str | None,
    source: str,
    phase: Phase,
    not_before_ns: int | None,
    timeout_s: float = 5.0,
    fmt: ImageFormat = "png",
    artifact_id: str | None = None,
    step: str | None = None,
) -> EvidenceArtifact:
    """Capture the newest frame of ``source`` as evidence; never raises for a failed capture.

    When ``not_before_ns`` is given (required for ``after``: the Action's terminal time)
    the frame's capture stamp must be strictly newer; older frames are re-read with short
    pauses until ``timeout_s`` passes, then the artifact fails with ``EVIDENCE_STALE``.
    A retryable Gateway answer (503, no frame yet) is re-read the same way. Other failure
    codes: ``EVIDENCE_CAPTURE_FAILED`` (the cause in ``details``),
    ``EVIDENCE_MEDIA_MISMATCH``, ``EVIDENCE_UNDECODABLE``, ``EVIDENCE_WRITE_FAILED``.
    ``ValueError`` only for caller bugs: an unknown phase, ``after`` without a window
    start, or ids that cannot name a file.
    """
    if phase not in _PHASES:
        raise ValueError(f"phase must be 'before' or 'after', not {phase!r}")
    if phase == "after" and not_before_ns is None:
        raise ValueError("an after capture needs not_before_ns (the action's terminal time)")
    artifact_id = artifact_id or f"ev-{uuid.uuid4().hex}"
    _safe_component(task_id, "task_id")
    _safe_component(artifact_id, "artifact_id")
    base = EvidenceArtifact(artifact_id, task_id, revision_id, record_id, source, phase, step=step)
    fetched = await _fetch_fresh(client, source, fmt, not_before_ns, timeout_s)
    if isinstance(fetched, _Refused):
        return _failed(base, fetched.image, fetched.error)
    return await asyncio.to_thread(_retain, base, fetched, workspace)


async def _fetch_fresh(
    client: ForgeToolClient,
    source: str,
    fmt: ImageFormat,
    not_before_ns: int | None,
    timeout_s: float,
) -> ImageBytes | _Refused:
    """Read the latest frame until it is newer than ``not_before_ns`` (bounded)."""
    deadline = time.monotonic() + timeout_s
    while True:
        outcome = await _read_once(client, source, fmt, not_before_ns)
        if isinstance(outcome, ImageBytes):
            return outcome
        remaining = deadline - time.monotonic()
        if outcome.error["code"] != "EVIDENCE_STALE" and not _retryable(outcome):
            return outcome
        if remaining <= 0:
            return outcome
        await asyncio.sleep(min(POLL_INTERVAL_S, remaining))


async def _read_once(
    client: ForgeToolClient, source: str, fmt: ImageFormat, not_before_ns: int | None
) -> ImageBytes | _Refused:
    try:
        image = await client.latest_image(source, fmt=fmt)
    except PaosError as exc:
        return _Refused(_capture_error(exc))
    if not_before_ns is not None and image.stamp_ns <= not_before_ns:
        details = {"seq": image.seq, "stamp_ns": image.stamp_ns, "not_before_ns": not_before_ns}
        message = f"no frame of {source!r} newer than the capture window start"
        return _Refused(_error("EVIDENCE_STALE", message, details), image)
    return image


def _retryable(refused: _Refused) -> bool:
    return bool(refused.error.get("details", {}).get("retryable"))


def _capture_error(exc: PaosError) -> dict[str, Any]:
    cause = exc.to_payload()
    if isinstance(exc, ForgeHttpError):
        cause["status_code"] = exc.status_code
    if remote_state := getattr(exc, "remote_state", None):
        cause["remote_state"] = remote_state
    return _error("EVIDENCE_CAPTURE_FAILED", exc.message, cause)


def _error(code: str, message: str, details: Mapping[str, Any] | None = None) -> dict[str, Any]:
    return {"code": code, "message": message, "details": dict(details or {})}


def _failed(
    base: EvidenceArtifact, image: ImageBytes | None, error: dict[str, Any]
) -> EvidenceArtifact:
    """A failed artifact: the error, and the frame's identity when one was seen."""
    return _with(base, error=error, **(_frame_fields(image) if image is not None else {}))


def _frame_fields(image: ImageBytes) -> dict[str, int]:
    return {
        "seq": image.seq,
        "captured_at_ns": image.stamp_ns,
        "received_at_ns": image.fetched_ns,
        "gateway_received_at_ns": image.received_ns,
    }


def _with(base: EvidenceArtifact, **changes: Any) -> EvidenceArtifact:
    return EvidenceArtifact(**{**asdict(base), **changes})


def _retain(base: EvidenceArtifact, image: ImageBytes, workspace: Path) -> EvidenceArtifact:
    """Check, decode and store the frame (worker thread: blocking I/O and decoding)."""
    media_type = image.content_type
    if _MAGIC.get(media_type) is None or not image.data.startswith(_MAGIC[media_type]):
        details = {"content_type": media_type, "magic": image.data[:8].hex()}
        message = f"bytes do not match the media type {media_type!r}"
        return _failed(base, image, _error("EVIDENCE_MEDIA_MISMATCH", message, details))
    pixels = _decode(image.data)
    if pixels is None:
        message = f"the {media_type} bytes do not decode"
        return _failed(base, image, _error("EVIDENCE_UNDECODABLE", message))
    relative = evidence_path(base.task_id, base.artifact_id, media_type)
    try:
        atomic_write_bytes(contained(workspace, relative), image.data)
    except (OSError, ValueError) as exc:
        return _failed(base, image, _error("EVIDENCE_WRITE_FAILED", str(exc)))
    return _with(
        base,
        **_frame_fields(image),
        media_type=media_type,
        width=int(pixels.shape[1]),
        height=int(pixels.shape[0]),
        size=len(image.data),
        sha256=hashlib.sha256(image.data).hexdigest(),
        path=relative,
    )


def _decode(data: bytes) -> np.ndarray | None:
    pixels = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_UNCHANGED)
    return pixels if pixels is not None and pixels.size else None


# ---------------------------------------------------------------- validation


def validate_bundle(
    artifacts: Sequence[EvidenceArtifact],
    *,
    workspace: Path,
    task_id: str,
    required_sources: Iterable[str],
    window: Mapping[str, int],
    max_age_s: float,
    blank_stddev: float = BLANK_STDDEV,
) -> BundleReport:
    """Check a task's evidence before any verifier reads it.

    ``window`` maps each bound Action's ``record_id`` to its terminal time (Unix ns): an
    ``after`` frame must be captured strictly later. Codes: ``EVIDENCE_FOREIGN``,
    ``EVIDENCE_DUPLICATE``, ``EVIDENCE_UNSAFE_PATH``, ``EVIDENCE_MISSING_FILE``,
    ``EVIDENCE_HASH_MISMATCH``, ``EVIDENCE_UNDECODABLE``, ``EVIDENCE_BLANK``,
    ``EVIDENCE_STALE``, ``EVIDENCE_OUT_OF_WINDOW``, ``EVIDENCE_MISSING_SOURCE``. Failed
    captures are not problems in themselves; they just do not count as evidence.
    Blocking (reads and decodes files): run it in a worker thread from async code.
    """
    problems: list[Problem] = []
    seen: set[str] = set()
    accepted: list[EvidenceArtifact] = []
    for artifact in artifacts:
        found = _identity_problems(artifact, task_id, seen)
        if not found and artifact.ok:
            found = _artifact_problems(artifact, workspace, window, max_age_s, blank_stddev)
            accepted.append(artifact)
        problems.extend(found)
    problems.extend(_coverage_problems(accepted, required_sources, window))
    return BundleReport(problems)


def _problem(code: str, message: str, artifact_id: str | None = None) -> Problem:
    problem = {"code": code, "message": message}
    if artifact_id is not None:
        problem["artifact_id"] = artifact_id
    return problem


def _identity_problems(artifact: EvidenceArtifact, task_id: str, seen: set[str]) -> list[Problem]:
    aid = artifact.artifact_id
    if aid in seen:
        return [_problem("EVIDENCE_DUPLICATE", "artifact id appears twice", aid)]
    seen.add(aid)
    home = (EVIDENCE_DIR, task_id)
    if artifact.task_id != task_id:
        return [_problem("EVIDENCE_FOREIGN", f"belongs to task {artifact.task_id!r}", aid)]
    if artifact.path is not None and PurePosixPath(artifact.path).parts[:2] != home:
        return [_problem("EVIDENCE_FOREIGN", "bytes are outside this task's evidence", aid)]
    return []


def _artifact_problems(
    artifact: EvidenceArtifact,
    workspace: Path,
    window: Mapping[str, int],
    max_age_s: float,
    blank_stddev: float,
) -> list[Problem]:
    problems = _byte_problems(artifact, workspace, blank_stddev)
    aid = artifact.artifact_id
    captured, received = artifact.captured_at_ns or 0, artifact.received_at_ns or 0
    if received - captured > max_age_s * 1e9:
        age = (received - captured) / 1e9
        problems.append(_problem("EVIDENCE_STALE", f"frame was {age:.3f} s old when read", aid))
    if artifact.phase == "after":
        problems.extend(_window_problems(artifact, window))
    return problems


def _byte_problems(
    artifact: EvidenceArtifact, workspace: Path, blank_stddev: float
) -> list[Problem]:
    """Re-hash the retained bytes from disk; on a match, check they are not blank."""
    aid = artifact.artifact_id
    try:
        target = contained(workspace, artifact.path or "")
    except ValueError as exc:
        return [_problem("EVIDENCE_UNSAFE_PATH", str(exc), aid)]
    try:
        with target.open("rb") as handle:
            digest = hashlib.file_digest(handle, "sha256").hexdigest()
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return [_problem("EVIDENCE_MISSING_FILE", f"{artifact.path} is not on disk", aid)]
    if digest != artifact.sha256:
        return [_problem("EVIDENCE_HASH_MISMATCH", f"{artifact.path} bytes changed", aid)]
    pixels = _decode(target.read_bytes())
    if pixels is None:
        return [_problem("EVIDENCE_UNDECODABLE", f"{artifact.path} does not decode", aid)]
    spread = float(pixels.std())
    if spread < blank_stddev:
        return [_problem("EVIDENCE_BLANK", f"pixel std-dev {spread:.2f} is blank", aid)]
    return []


def _window_problems(artifact: EvidenceArtifact, window: Mapping[str, int]) -> list[Problem]:
    aid = artifact.artifact_id
    start = window.get(artifact.record_id) if artifact.record_id is not None else None
    if start is None:
        message = f"no capture window for record {artifact.record_id!r}"
        return [_problem("EVIDENCE_OUT_OF_WINDOW", message, aid)]
    if (artifact.captured_at_ns or 0) <= start:
        message = "after frame was captured before the action's terminal time"
        return [_problem("EVIDENCE_OUT_OF_WINDOW", message, aid)]
    return []


def _coverage_problems(
    accepted: Sequence[EvidenceArtifact],
    required_sources: Iterable[str],
    window: Mapping[str, int],
) -> list[Problem]:
    """Each required source has a before and an after newer than the last action."""
    problems: list[Problem] = []
    last_action = max(window.values(), default=None)
    for source in sorted(set(required_sources)):
        for phase in _PHASES:
            frames = [a for a in accepted if a.source == source and a.phase == phase]
            if not frames:
                message = f"no successful {phase} frame from {source!r}"
                problems.append(_problem("EVIDENCE_MISSING_SOURCE", message))
            elif phase == "after" and last_action is not None:
                newest = max(a.captured_at_ns or 0 for a in frames)
                if newest <= last_action:
                    message = f"no after frame from {source!r} is newer than the last action"
                    problems.append(_problem("EVIDENCE_OUT_OF_WINDOW", message))
    return problems
