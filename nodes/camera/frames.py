"""The camera data plane: remembers the newest frame's header per source, never its pixels.

Frames arrive as ``forge_msgs.Image`` rows with Dora metadata ``{"seq", "stamp_ns",
"source"}``. Only the header columns are read, so a 480x640 frame costs no copy here.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from doraforge.nodes.dataplane import Publish

logger = logging.getLogger(__name__)

INPUT_PREFIX = "image_"


@dataclass(frozen=True)
class FrameHeader:
    """What ``capture`` reports about one frame (``stamp_ns``: capture time, Unix ns)."""

    source: str
    seq: int
    stamp_ns: int
    width: int
    height: int
    encoding: str
    received_at: float  # the provider's monotonic clock


def _header(value: pa.Array, metadata: Mapping[str, Any]) -> tuple[int, int, int, int, str]:
    """``(seq, stamp_ns, width, height, encoding)``; raises on anything malformed."""
    if isinstance(value, pa.RecordBatch):
        value = value.to_struct_array()
    if not isinstance(value, pa.StructArray) or len(value) != 1:
        raise ValueError("an image is a one-row struct")
    seq, stamp = metadata["seq"], metadata["stamp_ns"]
    if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in (seq, stamp)):
        raise ValueError("seq and stamp_ns must be non-negative integers")
    width = value.field("width")[0].as_py()
    height = value.field("height")[0].as_py()
    encoding = value.field("encoding")[0].as_py()
    return seq, stamp, int(width), int(height), str(encoding)


class FramePlane:
    """Consumes ``image_<source>`` inputs; answers the newest header per source."""

    def __init__(self, sources: Sequence[str], clock: Callable[[], float]) -> None:
        self.sources = tuple(sources)
        self._clock = clock
        self._latest: dict[str, FrameHeader] = {}

    @property
    def inputs(self) -> frozenset[str]:
        return frozenset(INPUT_PREFIX + source for source in self.sources)

    def attach(self, publish: Publish) -> None:
        """The camera publishes nothing on the data plane."""

    def close(self) -> None:
        """Nothing runs in the background."""

    def on_input(self, input_id: str, value: pa.Array, metadata: Mapping[str, Any]) -> None:
        source = input_id.removeprefix(INPUT_PREFIX)
        if source not in self.sources:
            return
        try:
            seq, stamp, width, height, encoding = _header(value, metadata)
        except (KeyError, ValueError, TypeError, pa.ArrowException) as exc:
            logger.warning("frame on %s dropped: %s", input_id, exc)
            return
        previous = self._latest.get(source)
        if previous is not None and seq <= previous.seq:
            return  # out of order or replayed: the newest frame stays newest
        header = FrameHeader(source, seq, stamp, width, height, encoding, self._clock())
        self._latest[source] = header

    def latest(self, source: str) -> FrameHeader | None:
        return self._latest.get(source)

    def age(self, source: str) -> float:
        """Seconds since ``source``'s newest frame arrived; infinite before the first."""
        header = self._latest.get(source)
        return math.inf if header is None else max(0.0, self._clock() - header.received_at)
