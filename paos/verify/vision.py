"""The vision verifier: did the coloured object move into the coloured target region?

It reads the BEFORE and AFTER frames of one camera source from the evidence, segments the
object and target colours in HSV and decides:

* ``pass`` - in the after frame the object's centroid lies inside the target's bounding box
  (dilated a little) and the object moved from where it was in the before frame;
* ``fail`` - the object is visible in the after frame but outside the target, or it is inside
  but never moved;
* ``inconclusive`` - a frame is missing or unreadable, or the object or target is not found.

Small blobs are expected: the simulated cube is about 24x29 px in the 640x480 scene frame.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio.to_thread
import cv2
import numpy as np

if TYPE_CHECKING:
    from cv2.typing import MatLike

from doraforge.paos.verify.contract import Criterion, VisionCriterion
from doraforge.paos.verify.protocol import (
    CriterionResult,
    CriterionStatus,
    VerificationContext,
    artifact_ref,
)

log = logging.getLogger(__name__)

MAX_FRAME_BYTES = 32 * 1024 * 1024

# OpenCV hue runs 0..179. Red wraps around 0, so it is two bands. Saturation and value floors
# keep the tan table (hue ~15, saturation ~90), grey metal and shadows out of every mask.
_SAT_MIN, _VAL_MIN = 110, 50
HUE_BANDS: dict[str, tuple[tuple[int, int], ...]] = {
    "red": ((0, 9), (170, 179)),
    "yellow": ((20, 34),),
    "green": ((35, 85),),
    "blue": ((95, 130),),
}


@dataclass(frozen=True)
class Blob:
    """One colour region: centroid (x, y) and bounding box (x0, y0, x1, y1), pixels."""

    centroid: tuple[float, float]
    box: tuple[int, int, int, int]
    area: int

    def contains(self, point: tuple[float, float], margin: float) -> bool:
        """True when ``point`` lies in the box grown by ``margin`` pixels on every side."""
        x0, y0, x1, y1 = self.box
        x, y = point
        return x0 - margin <= x <= x1 + margin and y0 - margin <= y <= y1 + margin


@dataclass(frozen=True)
class VisionConfig:
    """Tolerances: smallest blob (px), box dilation (px and fraction of size), least move."""

    min_area: int = 12
    margin_px: float = 3.0
    margin_ratio: float = 0.1
    min_move_px: float = 3.0


def color_mask(image: np.ndarray, color: str) -> MatLike:
    """A 0/255 mask of the pixels of ``color`` in a BGR ``image``."""
    hsv = cv2.cvtColor(image, cv2.COLOR_BGR2HSV)
    mask: MatLike = np.zeros(hsv.shape[:2], dtype=np.uint8)
    for low, high in HUE_BANDS[color]:
        band = cv2.inRange(hsv, (low, _SAT_MIN, _VAL_MIN), (high, 255, 255))
        mask = cv2.bitwise_or(mask, band)
    return mask


def find_blob(image: np.ndarray, color: str, min_area: int) -> Blob | None:
    """The largest ``color`` region, merged with regions touching its box (an object lying on
    a region splits it); ``None`` when no region reaches ``min_area`` pixels."""
    count, _, stats, centroids = cv2.connectedComponentsWithStats(
        color_mask(image, color), connectivity=8
    )
    parts = [i for i in range(1, count) if stats[i, cv2.CC_STAT_AREA] >= min_area]
    if not parts:
        return None
    parts.sort(key=lambda i: -int(stats[i, cv2.CC_STAT_AREA]))
    box, members = _box(stats[parts[0]]), [parts[0]]
    for i in parts[1:]:
        if _touches(box, _box(stats[i]), gap=2):
            box, members = _union(box, _box(stats[i])), [*members, i]
    areas = stats[members, cv2.CC_STAT_AREA].astype(float)
    x, y = (centroids[members] * areas[:, None]).sum(axis=0) / areas.sum()
    return Blob(centroid=(float(x), float(y)), box=box, area=int(areas.sum()))


def judge(
    before: np.ndarray, after: np.ndarray, criterion: VisionCriterion, config: VisionConfig
) -> tuple[CriterionStatus, str]:
    """Decide ``criterion`` from a before and an after BGR frame of the same camera."""
    if before.shape != after.shape:
        return "inconclusive", f"frames differ in size: {before.shape} and {after.shape}"
    obj_before = find_blob(before, criterion.object_color, config.min_area)
    obj_after = find_blob(after, criterion.object_color, config.min_area)
    target = find_blob(after, criterion.target_color, config.min_area)
    target = target or find_blob(before, criterion.target_color, config.min_area)
    if obj_before is None or obj_after is None:
        where = "before" if obj_before is None else "after"
        return "inconclusive", f"no {criterion.object_color} object in the {where} frame"
    if target is None:
        return "inconclusive", f"no {criterion.target_color} target in either frame"
    x0, y0, x1, y1 = target.box
    margin = max(config.margin_px, config.margin_ratio * max(x1 - x0, y1 - y0))
    moved = float(np.hypot(*np.subtract(obj_after.centroid, obj_before.centroid)))
    inside = target.contains(obj_after.centroid, margin)
    facts = f"object at {_fmt(obj_after.centroid)}, target box {target.box}, moved {moved:.1f} px"
    if not inside:
        return "fail", f"object outside the target: {facts}"
    if target.contains(obj_before.centroid, margin):
        # Already there before: whatever the task did (a re-placement shifts it a few
        # pixels either side of min_move_px), it did not move the object into the target.
        return "fail", f"object was inside the target before: it did not move into it: {facts}"
    if moved < config.min_move_px:
        return "fail", f"object inside the target but it did not move: {facts}"
    return "pass", f"object moved into the target: {facts}"


def pick_frames(
    evidence: Sequence[Mapping[str, Any]], source: str
) -> tuple[Mapping[str, Any] | None, Mapping[str, Any] | None]:
    """The first ``before`` and the last ``after`` artifact of ``source`` that has a file."""
    usable = [a for a in evidence if a.get("source") == source and isinstance(a.get("file"), str)]
    before = [a for a in usable if a.get("phase") == "before"]
    after = [a for a in usable if a.get("phase") == "after"]
    first = min(before, key=_seq, default=None)
    last = max(after, key=_seq, default=None)
    return first, last


class VisionVerifier:
    """Verifier for ``kind: vision`` criteria over before/after evidence frames."""

    kind = "vision"

    def __init__(self, config: VisionConfig | None = None) -> None:
        self.config = config or VisionConfig()

    async def verify(self, criterion: Criterion, context: VerificationContext) -> CriterionResult:
        """Load the frames of ``criterion.source`` and judge them (OpenCV runs off-loop)."""
        if not isinstance(criterion, VisionCriterion):
            return CriterionResult(criterion.id, "inconclusive", "not a vision criterion")
        before, after = pick_frames(context.evidence, criterion.source)
        refs = tuple(artifact_ref(a) for a in (before, after) if a is not None)
        if before is None or after is None:
            missing = "before" if before is None else "after"
            detail = f"no {missing} frame of source {criterion.source}"
            return CriterionResult(criterion.id, "inconclusive", detail, refs)
        status, detail = await anyio.to_thread.run_sync(
            self._judge_files, str(before["file"]), str(after["file"]), criterion
        )
        return CriterionResult(criterion.id, status, detail, refs)

    def _judge_files(
        self, before_file: str, after_file: str, criterion: VisionCriterion
    ) -> tuple[CriterionStatus, str]:
        before, after = _read(before_file), _read(after_file)
        if before is None or after is None:
            return "inconclusive", "a frame could not be decoded"
        try:
            return judge(before, after, criterion, self.config)
        except cv2.error as exc:
            log.warning("vision criterion %s: OpenCV failed: %s", criterion.id, exc)
            return "inconclusive", f"image analysis failed: {exc}"


def _read(path: str) -> np.ndarray | None:
    try:
        if not 0 < os.path.getsize(path) <= MAX_FRAME_BYTES:
            return None
        data = np.fromfile(path, dtype=np.uint8)
    except OSError:
        return None
    image = cv2.imdecode(data, cv2.IMREAD_COLOR)
    return image if image is not None and image.size else None


def _seq(artifact: Mapping[str, Any]) -> float:
    seq = artifact.get("seq")
    return float(seq) if isinstance(seq, int | float) and not isinstance(seq, bool) else 0.0


def _box(stats: np.ndarray) -> tuple[int, int, int, int]:
    x, y = int(stats[cv2.CC_STAT_LEFT]), int(stats[cv2.CC_STAT_TOP])
    return x, y, x + int(stats[cv2.CC_STAT_WIDTH]) - 1, y + int(stats[cv2.CC_STAT_HEIGHT]) - 1


def _touches(a: tuple[int, int, int, int], b: tuple[int, int, int, int], gap: int) -> bool:
    return a[0] - gap <= b[2] and b[0] - gap <= a[2] and a[1] - gap <= b[3] and b[1] - gap <= a[3]


def _union(a: tuple[int, int, int, int], b: tuple[int, int, int, int]) -> tuple[int, int, int, int]:
    return min(a[0], b[0]), min(a[1], b[1]), max(a[2], b[2]), max(a[3], b[3])


def _fmt(point: tuple[float, float]) -> str:
    return f"({point[0]:.0f}, {point[1]:.0f})"
