"""The frame budgets of registry.frames hold for any input: a 4K noise frame, a tiny one,
a PNG with alpha, a grey PNG, frames of extreme aspect; and bytes that are no image fail."""

from __future__ import annotations

import base64
import hashlib

import cv2
import numpy as np
import pytest

from doraforge.registry.errors import ToolFailure
from doraforge.registry.frames import (
    MAX_BASE64_CHARS,
    MAX_HEIGHT,
    MAX_JPEG_BYTES,
    MIN_BUDGET_BYTES,
    EncodedFrame,
    encode_within,
    fit_within,
    visible,
)

JPEG_MAGIC = b"\xff\xd8\xff"


def noise(height: int, width: int, channels: int = 3, seed: int = 7) -> np.ndarray:
    """Pixels JPEG cannot compress: the worst case for the byte budget."""
    shape = (height, width, channels) if channels > 1 else (height, width)
    return np.random.default_rng(seed).integers(0, 256, shape, dtype=np.uint8)


def png(pixels: np.ndarray) -> bytes:
    ok, encoded = cv2.imencode(".png", pixels)
    assert ok
    return encoded.tobytes()


def assert_within_budget(frame: EncodedFrame) -> None:
    image = frame.image()
    data = base64.b64decode(image["data"], validate=True)
    assert data == frame.data
    assert data.startswith(JPEG_MAGIC)
    assert image["mediaType"] == "image/jpeg"
    assert image["bytes"] == len(data) <= MAX_JPEG_BYTES
    assert len(image["data"]) <= MAX_BASE64_CHARS == 16_000
    assert image["sha256"] == hashlib.sha256(data).hexdigest()
    decoded = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
    assert decoded is not None
    assert (decoded.shape[1], decoded.shape[0]) == (image["width"], image["height"])
    assert 1 <= image["width"] <= 320
    assert 1 <= image["height"] <= MAX_HEIGHT


def test_a_4k_noise_frame_fits_both_budgets_with_its_aspect_kept() -> None:
    frame = visible(png(noise(2160, 3840)))
    assert_within_budget(frame)
    assert (frame.original_width, frame.original_height) == (3840, 2160)
    assert frame.width / frame.height == pytest.approx(16 / 9, rel=0.02)


def test_a_noise_frame_at_the_pixel_budget_steps_quality_down_then_shrinks() -> None:
    frame = encode_within(noise(240, 320))
    assert_within_budget(frame)
    # Noise at 320x240 is over 12,000 bytes at every quality: the size had to give way.
    assert frame.width < 320
    assert frame.width / frame.height == pytest.approx(4 / 3, rel=0.02)


def test_a_smooth_frame_keeps_the_full_pixel_budget_and_the_best_quality() -> None:
    gradient = np.tile(np.linspace(0, 255, 640, dtype=np.uint8), (480, 1))
    frame = encode_within(cv2.cvtColor(gradient, cv2.COLOR_GRAY2BGR))
    assert_within_budget(frame)
    assert (frame.width, frame.height, frame.quality) == (320, 240, 85)


def test_a_tiny_frame_is_never_enlarged() -> None:
    frame = visible(png(noise(3, 5)))
    assert_within_budget(frame)
    assert (frame.width, frame.height) == (5, 3) == (frame.original_width, frame.original_height)


@pytest.mark.parametrize(
    ("height", "width", "size"), [(1, 5000, (320, 1)), (5000, 1, (1, 240)), (30, 4000, (320, 2))]
)
def test_frames_of_extreme_aspect_fit_and_keep_at_least_one_pixel(
    height: int, width: int, size: tuple[int, int]
) -> None:
    frame = encode_within(noise(height, width))
    assert_within_budget(frame)
    assert (frame.width, frame.height) == size


def test_a_png_with_alpha_and_a_grey_png_become_colour_jpegs() -> None:
    for pixels in (noise(480, 640, channels=4), noise(480, 640, channels=1)):
        frame = visible(png(pixels))
        assert_within_budget(frame)
        decoded = cv2.imdecode(np.frombuffer(frame.data, np.uint8), cv2.IMREAD_UNCHANGED)
        assert decoded is not None
        assert decoded.ndim == 3
        assert decoded.shape[2] == 3


def test_a_smaller_byte_budget_is_honoured_too() -> None:
    frame = encode_within(noise(480, 640), max_bytes=MIN_BUDGET_BYTES)
    assert len(frame.data) <= MIN_BUDGET_BYTES
    assert frame.data.startswith(JPEG_MAGIC)


def test_a_budget_too_small_for_any_jpeg_is_a_caller_bug() -> None:
    with pytest.raises(ValueError, match="max_bytes"):
        encode_within(noise(4, 4), max_bytes=MIN_BUDGET_BYTES - 1)


@pytest.mark.parametrize("data", [b"", b"GIF89a not really", b"\x89PNG\r\n\x1a\n" + b"\0" * 40])
def test_bytes_that_are_no_image_fail_with_a_code(data: bytes) -> None:
    with pytest.raises(ToolFailure) as failed:
        visible(data)
    assert failed.value.code == "FRAME_UNDECODABLE"


def test_fit_within_keeps_the_aspect_and_never_enlarges() -> None:
    assert fit_within(3840, 2160, 320, 240) == (320, 180)
    assert fit_within(480, 640, 320, 240) == (180, 240)
    assert fit_within(100, 50, 320, 240) == (100, 50)
    assert fit_within(100_000, 1, 320, 240) == (320, 1)
