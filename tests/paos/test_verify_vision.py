"""The vision verifier on real rendered frames (pass) and crafted ones (fail, inconclusive)."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest

from doraforge.paos.verify import CriterionResult, VerificationContext, VisionCriterion
from doraforge.paos.verify.vision import VisionVerifier, color_mask, find_blob, pick_frames

pytestmark = pytest.mark.anyio

DATA = Path(__file__).parent / "data"
CRITERION = VisionCriterion(
    kind="vision", id="cube_seen_in_zone", source="scene", object_color="red", target_color="green"
)
TABLE_BGR = (120, 160, 210)  # the tan table top of the simulated cell
GREEN_BGR = (40, 230, 40)
RED_BGR = (30, 30, 220)
ZONE = (200, 200, 262, 246)  # x0, y0, x1, y1 of the green target zone


def frame(
    cube_at: tuple[int, int] | None, *, zone: bool = True, cube_bgr: tuple[int, ...] = RED_BGR
) -> np.ndarray:
    """A 640x480 table with the green zone and a 15x15 px cube centred at ``cube_at``."""
    image = np.full((480, 640, 3), TABLE_BGR, dtype=np.uint8)
    if zone:
        cv2.rectangle(image, ZONE[:2], ZONE[2:], GREEN_BGR, thickness=-1)
    if cube_at is not None:
        x, y = cube_at
        cv2.rectangle(image, (x - 7, y - 7), (x + 7, y + 7), cube_bgr, thickness=-1)
    return image


def read_image(path: Path) -> np.ndarray:
    image = cv2.imread(str(path))
    assert image is not None, path
    return image


def artifact(path: Path, phase: str, seq: int, source: str = "scene") -> dict[str, Any]:
    return {
        "artifact_id": f"{phase}-{seq}",
        "source": source,
        "phase": phase,
        "seq": seq,
        "media_type": "image/png",
        "path": f"evidence/{path.name}",
        "file": str(path),
    }


def write(tmp_path: Path, name: str, image: np.ndarray, ext: str = ".png") -> Path:
    path = tmp_path / f"{name}{ext}"
    ok, data = cv2.imencode(ext, image)
    assert ok
    path.write_bytes(data.tobytes())
    return path


async def judge_images(tmp_path: Path, before: np.ndarray, after: np.ndarray) -> CriterionResult:
    evidence = [
        artifact(write(tmp_path, "before", before), "before", 1),
        artifact(write(tmp_path, "after", after), "after", 2),
    ]
    return await verify(evidence)


async def verify(evidence: list[dict[str, Any]]) -> CriterionResult:
    context = VerificationContext(task_id="t", revision_id="r", evidence=evidence)
    return await VisionVerifier().verify(CRITERION, context)


async def test_real_pick_and_place_frames_pass_and_cite_both_artifacts(tmp_path: Path) -> None:
    before = shutil.copy(DATA / "pick_place_before.png", tmp_path / "b.png")
    after = shutil.copy(DATA / "pick_place_after.png", tmp_path / "a.png")

    result = await verify([artifact(Path(before), "before", 4), artifact(Path(after), "after", 9)])

    assert result.status == "pass", result.detail
    assert result.criterion_id == "cube_seen_in_zone"
    assert result.evidence_refs == ("before-4", "after-9")


async def test_real_frames_pass_after_jpeg_compression(tmp_path: Path) -> None:
    # The Gateway's image observations are JPEG (quality 85); edges must not break blobs.
    params = [cv2.IMWRITE_JPEG_QUALITY, 85]
    images = [read_image(DATA / f"pick_place_{p}.png") for p in ("before", "after")]
    jpegs = []
    for im in images:
        jpeg = cv2.imdecode(cv2.imencode(".jpg", im, params)[1], cv2.IMREAD_COLOR)
        assert jpeg is not None
        jpegs.append(jpeg)
    assert (await judge_images(tmp_path, *jpegs)).status == "pass"


async def test_real_frames_swapped_fail_because_the_cube_ends_outside(tmp_path: Path) -> None:
    before = read_image(DATA / "pick_place_after.png")
    after = read_image(DATA / "pick_place_before.png")
    result = await judge_images(tmp_path, before, after)
    assert result.status == "fail"
    assert "outside" in result.detail


async def test_a_small_cube_moved_into_the_zone_passes(tmp_path: Path) -> None:
    result = await judge_images(tmp_path, frame((420, 320)), frame((230, 222)))
    assert result.status == "pass", result.detail


async def test_a_cube_left_beside_the_zone_fails(tmp_path: Path) -> None:
    result = await judge_images(tmp_path, frame((420, 320)), frame((300, 222)))
    assert result.status == "fail"


async def test_a_cube_that_was_already_in_the_zone_and_never_moved_fails(tmp_path: Path) -> None:
    result = await judge_images(tmp_path, frame((230, 222)), frame((230, 222)))
    assert result.status == "fail"
    assert "did not move" in result.detail


async def test_a_cube_already_in_the_zone_and_put_back_a_little_aside_fails(
    tmp_path: Path,
) -> None:
    # A second pick-and-place of a placed cube re-places it a few pixels away, past
    # min_move_px: it still did not move into the zone, it was there before.
    result = await judge_images(tmp_path, frame((230, 222)), frame((236, 222)))
    assert result.status == "fail"
    assert "inside the target before" in result.detail


async def test_a_cube_just_past_the_zone_edge_counts_as_inside(tmp_path: Path) -> None:
    # The cube sits on the zone but its projected centre is a few pixels above the green box.
    result = await judge_images(tmp_path, frame((420, 320)), frame((230, ZONE[1] - 3)))
    assert result.status == "pass", result.detail


async def test_red_hues_on_both_sides_of_zero_are_found(tmp_path: Path) -> None:
    crimson = cv2.cvtColor(np.array([[[176, 230, 200]]], dtype=np.uint8), cv2.COLOR_HSV2BGR)[0, 0]
    orange_red = cv2.cvtColor(np.array([[[4, 230, 200]]], dtype=np.uint8), cv2.COLOR_HSV2BGR)[0, 0]
    for bgr in (crimson, orange_red):
        cube = tuple(int(c) for c in bgr)
        result = await judge_images(
            tmp_path, frame((420, 320), cube_bgr=cube), frame((230, 222), cube_bgr=cube)
        )
        assert result.status == "pass", (cube, result.detail)


def test_the_table_is_neither_red_nor_green() -> None:
    table = frame(None, zone=False)
    assert not color_mask(table, "red").any()
    assert not color_mask(table, "green").any()


def test_specks_below_the_minimum_area_are_not_an_object() -> None:
    image = frame(None)
    for x in range(300, 600, 40):
        image[400:402, x : x + 2] = RED_BGR
    assert find_blob(image, "red", min_area=12) is None


async def test_the_object_missing_from_the_after_frame_is_inconclusive(tmp_path: Path) -> None:
    result = await judge_images(tmp_path, frame((420, 320)), frame(None))
    assert result.status == "inconclusive"
    assert "after" in result.detail


async def test_the_object_missing_from_the_before_frame_is_inconclusive(tmp_path: Path) -> None:
    result = await judge_images(tmp_path, frame(None), frame((230, 222)))
    assert result.status == "inconclusive"


async def test_no_target_in_either_frame_is_inconclusive(tmp_path: Path) -> None:
    before, after = frame((420, 320), zone=False), frame((230, 222), zone=False)
    result = await judge_images(tmp_path, before, after)
    assert result.status == "inconclusive"
    assert "green" in result.detail


async def test_frames_of_different_sizes_are_inconclusive(tmp_path: Path) -> None:
    small_after = cv2.resize(frame((230, 222)), (320, 240), interpolation=cv2.INTER_NEAREST)
    result = await judge_images(tmp_path, frame((420, 320)), small_after)
    assert result.status == "inconclusive"
    assert "size" in result.detail


async def test_a_missing_after_frame_is_inconclusive(tmp_path: Path) -> None:
    before = artifact(write(tmp_path, "before", frame((420, 320))), "before", 1)
    failed_capture = {"source": "scene", "phase": "after", "seq": 2, "error": "timeout"}

    result = await verify([before, failed_capture])

    assert result.status == "inconclusive"
    assert "no after frame" in result.detail
    assert result.evidence_refs == ("before-1",)


async def test_an_unreadable_or_vanished_file_is_inconclusive(tmp_path: Path) -> None:
    before = artifact(write(tmp_path, "before", frame((420, 320))), "before", 1)
    garbage = tmp_path / "after.png"
    garbage.write_bytes(b"\x89PNG\r\n\x1a\n not really")
    vanished = artifact(tmp_path / "gone.png", "after", 3)

    assert (await verify([before, artifact(garbage, "after", 2)])).status == "inconclusive"
    assert (await verify([before, vanished])).status == "inconclusive"


def test_frames_are_the_first_before_and_the_last_after_of_the_source(tmp_path: Path) -> None:
    path = tmp_path / "x.png"
    evidence = [
        artifact(path, "after", 7),
        artifact(path, "before", 3),
        artifact(path, "after", 12),
        artifact(path, "before", 1),
        artifact(path, "after", 20, source="wrist"),
        {"source": "scene", "phase": "after", "seq": 30},  # a failed capture: no file
    ]

    before, after = pick_frames(evidence, "scene")

    assert before is not None
    assert before["artifact_id"] == "before-1"
    assert after is not None
    assert after["artifact_id"] == "after-12"
