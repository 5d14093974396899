"""Observations the Gateway serves beside tools: the latest camera frames and joint state.

Frames arrive on the Dora thread and are kept newest-first, one per source, as raw
``forge_msgs.Image`` pixels; PNG/JPEG encoding happens lazily, once per frame, on the
HTTP side. Joint state (100 Hz in simulation) is kept as it arrived and decoded when a
reader asks, and the asyncio loop is woken only while a stream waits: an unwatched
Gateway pays one reference swap per sample. Nothing here ever blocks the Dora thread on
a slow HTTP or WebSocket client.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
from forge_msgs import Image, JointState

_CONTENT_TYPES = {"jpeg": "image/jpeg", "png": "image/png"}


@dataclass
class Frame:
    """One camera frame with its capture identity; encodings are cached per format."""

    source: str
    seq: int
    stamp_ns: int
    received_ns: int
    width: int
    height: int
    encoding: str
    pixels: np.ndarray
    _encoded: dict[str, bytes] = field(default_factory=dict)

    def encoded(self, fmt: str, jpeg_quality: int = 90) -> bytes:
        """PNG or JPEG bytes of this frame (computed once per format)."""
        cached = self._encoded.get(fmt)
        if cached is None:
            cached = encode_image(self.pixels, self.encoding, fmt, jpeg_quality)
            self._encoded[fmt] = cached
        return cached


@dataclass(frozen=True, slots=True)
class _StateArrival:
    """One joint state as it came from Dora, with its receipt time and sequence number."""

    value: pa.RecordBatch | pa.StructArray
    received_ns: int
    seq: int


#: The columns a joint state must carry to be kept (its content is checked when read).
_STATE_COLUMNS = frozenset(("name", "position"))


def encode_image(pixels: np.ndarray, encoding: str, fmt: str, jpeg_quality: int = 90) -> bytes:
    """Encode an rgb8/bgr8/mono8 frame as ``png`` or ``jpeg``."""
    # OpenCV is imported by the first frame a client asks for: a Gateway that serves no
    # camera never maps its ~10 MiB of libraries (part of the RSS budget of issue 16).
    import cv2

    if encoding == "rgb8":
        pixels = cv2.cvtColor(pixels, cv2.COLOR_RGB2BGR)
    params = [cv2.IMWRITE_JPEG_QUALITY, jpeg_quality] if fmt == "jpeg" else []
    ok, buffer = cv2.imencode(".jpg" if fmt == "jpeg" else ".png", pixels, params)
    if not ok:
        raise ValueError(f"cannot encode a {encoding} frame as {fmt}")
    return buffer.tobytes()


class ObservationStore:
    """Latest frame per source and latest joint state, safe across threads.

    Writers (the Dora thread) only swap references under a lock; readers wait on a
    per-store condition through :meth:`wait_newer` from the asyncio loop.
    """

    def __init__(self, sources: Mapping[str, str], *, joint_state_input: str | None) -> None:
        self._source_for_input = dict(sources)  # dora input id -> source name
        self._joint_state_input = joint_state_input
        self._lock = threading.Lock()
        self._frames: dict[str, Frame] = {}
        self._state_arrival: _StateArrival | None = None
        self._state: tuple[_StateArrival, dict[str, Any]] | None = None  # newest decoded
        self._state_seq = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._changed = asyncio.Event()
        self._waiters = 0  # loop-side streams in wait_changed (read by the Dora thread)
        self.version = 0  # one more per stored observation
        self.dropped = 0

    @property
    def sources(self) -> list[str]:
        """The configured camera source names."""
        return sorted(set(self._source_for_input.values()))

    def bind_loop(self, loop: asyncio.AbstractEventLoop) -> None:
        """Let Dora-thread writes wake loop-side waiters."""
        self._loop = loop

    def handles(self, input_id: str) -> bool:
        """Whether ``input_id`` is an observation input."""
        return input_id in self._source_for_input or input_id == self._joint_state_input

    def on_input(self, input_id: str, value: Any, metadata: Mapping[str, Any]) -> None:
        """Store one observation (Dora thread); malformed values are counted and dropped
        (a joint state whose columns are right but whose content is not: when read)."""
        try:
            if input_id == self._joint_state_input:
                self._keep_state(value)
            elif input_id in self._source_for_input:
                self._store_frame(
                    self._source_for_input[input_id], Image.from_arrow(value), metadata
                )
            else:
                return
        except (ValueError, TypeError, KeyError):
            self.dropped += 1
            return
        if self._waiters and self._loop is not None:
            self._loop.call_soon_threadsafe(self._notify)

    def latest_frame(self, source: str) -> Frame | None:
        """The newest frame of ``source``."""
        with self._lock:
            return self._frames.get(source)

    def latest_state(self) -> tuple[int, dict[str, Any] | None]:
        """The newest well-formed joint state and its sequence number (loop thread)."""
        with self._lock:
            arrival, decoded = self._state_arrival, self._state
        if arrival is None or (decoded is not None and decoded[0] is arrival):
            return (0, None) if decoded is None else (decoded[0].seq, decoded[1])
        try:
            document = _state_document(JointState.from_arrow(arrival.value), arrival)
        except (ValueError, TypeError, KeyError, pa.ArrowException):
            self.dropped += 1
            document = None
        with self._lock:
            if document is not None:
                self._state = decoded = (arrival, document)
            if self._state_arrival is arrival:  # a malformed newest one is not retried
                self._state_arrival = decoded[0] if decoded is not None else None
        return (0, None) if decoded is None else (decoded[0].seq, decoded[1])

    async def wait_changed(self, timeout_s: float, since: int | None = None) -> None:
        """Return when any observation changed (after :attr:`version` was ``since``, when
        given), or after ``timeout_s``."""
        changed = self._changed
        self._waiters += 1  # before the check: a store after it sees a waiter and wakes us
        try:
            if since is not None and self.version != since:
                return
            await asyncio.wait_for(changed.wait(), timeout=timeout_s)
        except TimeoutError:
            return
        finally:
            self._waiters -= 1

    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    def _store_frame(self, source: str, image: Image, metadata: Mapping[str, Any]) -> None:
        now = time.time_ns()
        previous = self.latest_frame(source)
        seq = int(metadata.get("seq", (previous.seq + 1) if previous else 0))
        frame = Frame(
            source=source,
            seq=seq,
            stamp_ns=int(metadata.get("stamp_ns", now)),
            received_ns=now,
            width=image.width,
            height=image.height,
            encoding=image.encoding,
            pixels=image.to_numpy(),
        )
        with self._lock:
            self._frames[source] = frame
            self.version += 1

    def _keep_state(self, value: Any) -> None:
        columns = value.schema.names if isinstance(value, pa.RecordBatch) else None
        if isinstance(value, pa.StructArray):
            columns = [field.name for field in value.type]
        if columns is None or not _STATE_COLUMNS.issubset(columns):
            raise ValueError("a joint state carries name and position columns")
        received = time.time_ns()
        with self._lock:
            self._state_seq += 1
            self._state_arrival = _StateArrival(value, received, self._state_seq)
            self.version += 1


def _state_document(state: JointState, arrival: _StateArrival) -> dict[str, Any]:
    return {
        "name": list(state.name),
        "position": list(state.position),
        "velocity": list(state.velocity),
        "effort": list(state.effort),
        "received_ns": arrival.received_ns,
    }


def content_type(fmt: str) -> str:
    """The media type of ``png`` or ``jpeg``."""
    return _CONTENT_TYPES[fmt]
