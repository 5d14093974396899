"""Frames a model can see: camera and evidence frames as bounded JPEG images.

Agents otherwise get only ``frame://`` references. Two read tools (``forge.camera.frame``,
``forge.evidence.frame``, registered in :mod:`registry.robot_tools`) return one frame as
``{"image": {"mediaType": "image/jpeg", "data": <base64>, ...}, ...}``; the MCP edge turns a
top-level ``image`` into an ImageContent block, ``/api/tools/call`` returns it as it is.

Budgets, enforced for any input size and kind (PNG or JPEG, grey, colour or with alpha):

* pixels: at most :data:`MAX_WIDTH` x :data:`MAX_HEIGHT` (320 x 240), aspect ratio kept,
  never enlarged;
* bytes: the JPEG is at most :data:`MAX_JPEG_BYTES` (12,000), so its base64 is at most
  16,000 characters and the whole result, robot state included, stays inside the MCP
  result budget of 20,000 characters. Quality steps down through :data:`JPEG_QUALITIES`
  first; only when the lowest quality is still too big does the image shrink by
  :data:`SHRINK_FACTOR` and the qualities start again.

Encoding failures are :class:`~registry.errors.ToolFailure` (``FRAME_UNDECODABLE``), never
an exception leaking from OpenCV.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import math
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from doraforge.paos.errors import PaosError
from doraforge.paos.evidence import contained
from doraforge.paos.phyagentos_answers import iso
from doraforge.registry.context.budgets import MAX_IMAGE_DATA_CHARS
from doraforge.registry.errors import ToolFailure
from doraforge.registry.skill_gateway import SkillGateways

MEDIA_TYPE = "image/jpeg"
#: The pixel budget: a frame is scaled down (aspect kept) to fit inside it.
MAX_WIDTH = 320
MAX_HEIGHT = 240
#: The byte budget of the JPEG: the most bytes whose base64 fits the MCP edge's image data
#: budget (16,000 characters), so the image block is never refused there.
MAX_JPEG_BYTES = MAX_IMAGE_DATA_CHARS // 4 * 3
MAX_BASE64_CHARS = 4 * -(-MAX_JPEG_BYTES // 3)
#: Qualities tried in order at each size, best first.
JPEG_QUALITIES = (85, 75, 65, 55, 45, 35, 25)
#: Each side's factor when even the lowest quality does not fit.
SHRINK_FACTOR = 0.75
#: Below this a byte budget cannot hold a JPEG's own headers at any size.
MIN_BUDGET_BYTES = 1_024


@dataclass(frozen=True)
class EncodedFrame:
    """A frame re-encoded within the budgets, and the geometry it came from."""

    data: bytes
    width: int
    height: int
    quality: int
    original_width: int
    original_height: int

    def image(self) -> dict[str, Any]:
        """The ``image`` member of a frame result (base64 data, its size and SHA-256)."""
        return {
            "mediaType": MEDIA_TYPE,
            "data": base64.b64encode(self.data).decode("ascii"),
            "width": self.width,
            "height": self.height,
            "bytes": len(self.data),
            "sha256": hashlib.sha256(self.data).hexdigest(),
            "originalWidth": self.original_width,
            "originalHeight": self.original_height,
        }


def fit_within(width: int, height: int, max_width: int, max_height: int) -> tuple[int, int]:
    """The largest size inside ``max_width`` x ``max_height`` with the aspect of
    ``width`` x ``height``, never larger than the original and never below 1 x 1."""
    scale = min(max_width / width, max_height / height, 1.0)
    return max(1, round(width * scale)), max(1, round(height * scale))


def decode(data: bytes) -> np.ndarray:
    """Decode PNG or JPEG bytes to 8-bit BGR pixels (alpha dropped, grey expanded).

    Raises :class:`ToolFailure` ``FRAME_UNDECODABLE`` for bytes OpenCV cannot read.
    """
    try:
        pixels = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
    except cv2.error as exc:
        raise _undecodable() from exc
    if pixels is None or not pixels.size:
        raise _undecodable()
    return pixels


def encode_within(pixels: np.ndarray, *, max_bytes: int = MAX_JPEG_BYTES) -> EncodedFrame:
    """``pixels`` as a JPEG inside the pixel budget and at most ``max_bytes`` long.

    Raises ``ValueError`` for a budget below :data:`MIN_BUDGET_BYTES` (a caller's bug).
    """
    if max_bytes < MIN_BUDGET_BYTES:
        raise ValueError(f"max_bytes must be at least {MIN_BUDGET_BYTES}, not {max_bytes}")
    height, width = pixels.shape[:2]
    size = fit_within(width, height, MAX_WIDTH, MAX_HEIGHT)
    while True:
        scaled = _resized(pixels, size)
        for quality in JPEG_QUALITIES:
            data = _jpeg(scaled, quality)
            if len(data) <= max_bytes:
                return EncodedFrame(data, size[0], size[1], quality, width, height)
        # A 1 x 1 JPEG is a few hundred bytes, far below MIN_BUDGET_BYTES: this ends.
        size = _shrunk(size)


def visible(data: bytes) -> EncodedFrame:
    """PNG or JPEG bytes as a frame a model can see (decoded, then :func:`encode_within`)."""
    return encode_within(decode(data))


def _resized(pixels: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    if (pixels.shape[1], pixels.shape[0]) == size:
        return pixels
    # Area averaging: the downscale that neither aliases nor blurs a frame much.
    return cv2.resize(pixels, size, interpolation=cv2.INTER_AREA)


def _jpeg(pixels: np.ndarray, quality: int) -> bytes:
    ok, encoded = cv2.imencode(".jpg", pixels, [cv2.IMWRITE_JPEG_QUALITY, quality])
    if not ok:
        raise _undecodable()
    return encoded.tobytes()


def _shrunk(size: tuple[int, int]) -> tuple[int, int]:
    width, height = size
    return max(1, int(width * SHRINK_FACTOR)), max(1, int(height * SHRINK_FACTOR))


def _undecodable() -> ToolFailure:
    return ToolFailure(
        "FRAME_UNDECODABLE",
        "the frame's bytes are not an image OpenCV can decode; read another frame",
    )


# ---------------------------------------------------------------- the read tools

#: The running skill's Query tools whose outputs make the robot state of a camera frame.
STATE_TOOLS = ("arm.state", "gripper.state")
#: The Gateway's own deadline for each state Query: a slow state never holds a frame long.
STATE_TIMEOUT_MS = 2_000
#: At most this many joints per state (a bounded answer from any driver).
MAX_JOINTS = 16
_DIGITS = 5  # 10 µm / 10 µrad: finer than any joint or pad reading


class FrameReader:
    """The adapters of ``forge.camera.frame`` and ``forge.evidence.frame``.

    Both answer ``{"image": EncodedFrame.image(), ...}`` or raise :class:`ToolFailure`;
    a frame is only ever read from the Gateway of an installed, running skill
    (``gateways``) or from the PAOS workspace, never from anything a caller names.
    """

    def __init__(self, gateways: SkillGateways, task_service: Callable[[], Any]) -> None:
        self._gateways = gateways
        self._task_service = task_service

    async def camera_frame(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """The newest frame of ``source`` (default: the Gateway's first camera) and the
        robot state read beside it; a state that cannot be read is ``state: null`` with
        ``stateError``, never a failed frame."""
        gateway_url = await self._gateways.url(arguments["skill"])
        service = self._service()
        client = service.client(gateway_url)
        with _as_failure():
            source = _chosen(await client.image_sources(), arguments.get("source"))
            image, (state, state_error) = await asyncio.gather(
                client.latest_image(source, fmt="jpeg"), _robot_state(service, gateway_url)
            )
        encoded = await asyncio.to_thread(visible, image.data)
        answer = {
            "image": encoded.image(),
            "source": source,
            **_stamps(image.seq, image.stamp_ns),
            "state": state,
        }
        return answer if state_error is None else {**answer, "stateError": state_error}

    async def evidence_frame(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """A retained evidence frame of a task, re-hashed against its record first.

        Raises ``PAOS_NOT_FOUND`` (no such task), ``EVIDENCE_NOT_FOUND``,
        ``EVIDENCE_NOT_RETAINED`` (the capture failed), ``EVIDENCE_UNSAFE_PATH``,
        ``EVIDENCE_MISSING_FILE`` or ``EVIDENCE_HASH_MISMATCH`` (the bytes changed).
        """
        task_id, artifact_id = arguments["task_id"], arguments["artifact_id"]
        service = self._service()
        with _as_failure():
            service.store.task(task_id)  # PAOS_NOT_FOUND names where the task ids are
            artifact = _artifact(service.store.evidence(task_id), task_id, artifact_id)
        data = await asyncio.to_thread(retained_bytes, Path(service.workspace), artifact)
        encoded = await asyncio.to_thread(visible, data)
        return {
            "image": encoded.image(),
            "taskId": task_id,
            "artifactId": artifact_id,
            "source": artifact["source"],
            "phase": artifact["phase"],
            **_stamps(artifact["seq"], artifact["captured_at_ns"]),
            "evidenceSha256": artifact["sha256"],
        }

    def _service(self) -> Any:
        with _as_failure():  # the store did not open: nothing was read
            return self._task_service()


@contextmanager
def _as_failure() -> Iterator[None]:
    """Turns a :class:`PaosError` raised inside the block into a :class:`ToolFailure`."""
    try:
        yield
    except PaosError as exc:
        raise ToolFailure(exc.code, exc.message, retryable=exc.retryable) from exc


def _chosen(sources: list[dict[str, Any]], wanted: str | None) -> str:
    """``wanted``, or the first camera the Gateway lists; a name it does not list (or no
    camera at all) is a failure that lists the ones it has."""
    names: list[str] = [s["source"] for s in sources if isinstance(s.get("source"), str)]
    if wanted is None and names:
        return names[0]
    if wanted is not None and wanted in names:
        return wanted
    listed = ", ".join(names) or "none"
    asked = "has no camera source" if wanted is None else f"has no camera source {wanted!r}"
    message = f"the skill's Gateway {asked}; its sources: {listed}"
    raise ToolFailure("FRAME_UNKNOWN_SOURCE", message, details={"sources": names})


def _stamps(seq: int, stamp_ns: int) -> dict[str, Any]:
    # Nanosecond stamps exceed JSON's interoperable integers (2^53): a decimal string,
    # as the Gateway's own observation listing sends them.
    return {"seq": seq, "capturedAt": iso(stamp_ns // 1_000_000), "capturedAtNs": str(stamp_ns)}


# ---------------------------------------------------------------- robot state


async def _robot_state(
    service: Any, gateway_url: str
) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """``(state, None)`` from :data:`STATE_TOOLS`, or ``(None, {code, toolId, message})``
    for the first that could not be read (the error's own text never reaches an agent)."""
    read = [_outputs(service, gateway_url, tool_id) for tool_id in STATE_TOOLS]
    outcomes = await asyncio.gather(*read, return_exceptions=True)
    outputs: list[dict[str, Any]] = []
    for tool_id, outcome in zip(STATE_TOOLS, outcomes, strict=True):
        if isinstance(outcome, PaosError | _StateUnread):
            message = "the robot state could not be read; the frame itself is current"
            return None, {"code": outcome.code, "toolId": tool_id, "message": message}
        if isinstance(outcome, BaseException):
            raise outcome
        outputs.append(outcome)
    arm, gripper = outputs
    return {"arm": bounded_arm(arm), "gripper": bounded_gripper(gripper)}, None


class _StateUnread(Exception):
    def __init__(self, code: str) -> None:
        super().__init__(code)
        self.code = code


async def _outputs(service: Any, gateway_url: str, tool_id: str) -> dict[str, Any]:
    """The outputs of a succeeded diagnostic Query, else :class:`_StateUnread` with the
    result's own error code (``STATE_QUERY_FAILED`` when it has none)."""
    data = await service.query(tool_id, {}, gateway_url=gateway_url, timeout_ms=STATE_TIMEOUT_MS)
    result = _member(_member(data, "response"), "result")
    outputs = result.get("outputs")
    if result.get("status") != "succeeded" or not isinstance(outputs, dict):
        code = _member(result, "error").get("code")
        raise _StateUnread(code if isinstance(code, str) else "STATE_QUERY_FAILED")
    return outputs


def _member(value: Any, key: str) -> dict[str, Any]:
    """``value[key]`` when both are objects, else ``{}`` (a malformed answer reads empty)."""
    member = value.get(key) if isinstance(value, dict) else None
    return member if isinstance(member, dict) else {}


def bounded_arm(outputs: Mapping[str, Any]) -> dict[str, Any]:
    """The arm's joints (at most :data:`MAX_JOINTS`), tool position and yaw, whether it
    moves and the measurement's age; anything else, or of the wrong type, left out."""
    return {
        "joints": _joints(outputs.get("joints")),
        "position": _vector(outputs.get("position")),
        "yaw": _number(outputs.get("yaw")),
        "moving": _flag(outputs.get("moving")),
        "stale_ms": _count(outputs.get("stale_ms")),
    }


def bounded_gripper(outputs: Mapping[str, Any]) -> dict[str, Any]:
    """The gripper's width between the pads, whether it holds something, its age."""
    return {
        "width": _number(outputs.get("width")),
        "holding": _flag(outputs.get("holding")),
        "stale_ms": _count(outputs.get("stale_ms")),
    }


def _number(value: Any) -> float | None:
    real = isinstance(value, int | float) and not isinstance(value, bool)
    return round(float(value), _DIGITS) if real and math.isfinite(value) else None


def _joints(value: Any) -> dict[str, float]:
    if not isinstance(value, Mapping):
        return {}
    named = ((k, _number(v)) for k, v in value.items() if isinstance(k, str) and len(k) <= 64)
    return dict([(k, v) for k, v in named if v is not None][:MAX_JOINTS])


def _vector(value: Any) -> list[float] | None:
    if not isinstance(value, list) or len(value) != 3:
        return None
    numbers = [_number(v) for v in value]
    return None if None in numbers else [n for n in numbers if n is not None]


def _flag(value: Any) -> bool | None:
    return value if isinstance(value, bool) else None


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


# ---------------------------------------------------------------- evidence


def _artifact(evidence: list[dict[str, Any]], task_id: str, artifact_id: str) -> dict[str, Any]:
    """The task's record of ``artifact_id``, when it retained bytes."""
    found = next((a for a in evidence if a.get("artifact_id") == artifact_id), None)
    ids = {"task_id": task_id, "artifact_id": artifact_id}
    if found is None:
        message = f"task {task_id!r} has no evidence artifact {artifact_id!r}"
        raise ToolFailure("EVIDENCE_NOT_FOUND", message + "; forge_task_get lists it", details=ids)
    if found.get("error") is not None or not found.get("path") or not found.get("sha256"):
        code = (found.get("error") or {}).get("code")
        message = f"artifact {artifact_id!r} is a failed capture ({code}): no frame was kept"
        raise ToolFailure("EVIDENCE_NOT_RETAINED", message + "; read another one", details=ids)
    return found


def retained_bytes(workspace: Path, artifact: Mapping[str, Any]) -> bytes:
    """The artifact's bytes from ``workspace``, proven contained and unchanged.

    Reads at most the recorded size (plus one byte, to see growth), so a file swapped
    for a huge one is refused without being read whole. Blocking: run in a worker thread.
    Raises :class:`ToolFailure` ``EVIDENCE_UNSAFE_PATH``, ``EVIDENCE_MISSING_FILE`` or
    ``EVIDENCE_HASH_MISMATCH``; no message names a path.
    """
    aid = {"artifact_id": artifact["artifact_id"]}
    try:
        target = contained(workspace, artifact["path"])
    except ValueError as exc:
        message = "the artifact's recorded location is outside the workspace; not read"
        raise ToolFailure("EVIDENCE_UNSAFE_PATH", message, details=aid) from exc
    try:
        with target.open("rb") as handle:
            data = handle.read(int(artifact["size"] or 0) + 1)
    except OSError as exc:  # gone, a directory now, or unreadable
        message = "the artifact's bytes are no longer in the workspace"
        raise ToolFailure("EVIDENCE_MISSING_FILE", message, details=aid) from exc
    if hashlib.sha256(data).hexdigest() != artifact["sha256"]:
        message = "the artifact's bytes changed since capture (SHA-256 mismatch); not shown"
        raise ToolFailure("EVIDENCE_HASH_MISMATCH", message, details=aid)
    return data
