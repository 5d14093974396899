"""forge.evidence.frame over a real PAOS home: evidence captured from a real Gateway into
the real SQLite store is shown within the budgets; tampered, vanished, escaped, failed and
unknown artifacts are refused with codes, and no answer names a path."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest
from forge_msgs import Image

from doraforge.gateway.config import ImageSource, ObservationsConfig
from doraforge.gateway.core import Gateway
from doraforge.paos.evidence import EvidenceArtifact, capture
from doraforge.paos.home import PaosHome, open_service
from doraforge.paos.tasks import TaskService
from doraforge.registry.errors import ToolFailure
from doraforge.registry.frames import MAX_JPEG_BYTES, FrameReader
from tests.gateway.harness import mock_config
from tests.gateway.support import live_gateway

pytestmark = pytest.mark.anyio

TASK = "task_frames"
OBSERVATIONS = ObservationsConfig(images=[ImageSource(source="scene", input="image_scene")])


@dataclass
class Retained:
    """A home whose one task holds a retained PNG frame and a failed capture."""

    home: PaosHome
    service: TaskService
    frame: EvidenceArtifact
    failed: EvidenceArtifact

    def read(self, artifact_id: str, task_id: str = TASK) -> Any:
        frames = FrameReader(None, lambda: self.service)  # type: ignore[arg-type]
        return frames.evidence_frame({"task_id": task_id, "artifact_id": artifact_id})

    @property
    def bytes_path(self) -> Path:
        assert self.frame.path is not None
        return self.home.workspace / self.frame.path


def _scene() -> np.ndarray:
    rng = np.random.default_rng(11)
    return rng.integers(0, 256, (480, 640, 3), dtype=np.uint8)


async def _captured(home: PaosHome, stamp_ns: int) -> tuple[EvidenceArtifact, EvidenceArtifact]:
    gateway = Gateway(mock_config(observations=OBSERVATIONS), send=lambda *_: None)
    gateway.observations.on_input(
        "image_scene", Image.from_numpy(_scene()).to_arrow(), {"seq": 7, "stamp_ns": stamp_ns}
    )
    common: dict[str, Any] = {"workspace": home.workspace, "task_id": TASK, "revision_id": "rev_1"}
    with live_gateway(gateway) as live:
        service = open_service(PaosHome(home.root / "capturer"))
        try:
            client = service.client(live.url)
            frame = await capture(
                client,
                **common,
                record_id=None,
                source="scene",
                phase="before",
                not_before_ns=None,
                fmt="png",
            )
            failed = await capture(
                client,
                **common,
                record_id=None,
                source="scene",
                phase="after",
                not_before_ns=stamp_ns,
                timeout_s=0.05,
            )
        finally:
            await service.aclose()
            service.store.close()
    return frame, failed


@pytest.fixture
async def retained(tmp_path: Path) -> AsyncIterator[Retained]:
    home = PaosHome(tmp_path / "home")
    service = open_service(home)
    service.store.put_binding("bind_1", "0" * 64, {"skill": "pick-place"})
    service.store.create_task(
        task_id=TASK, revision_id="rev_1", binding_id="bind_1", goal="see", contract={}
    )
    frame, failed = await _captured(home, time.time_ns())
    assert frame.ok, frame.error
    assert failed.error is not None
    assert failed.error["code"] == "EVIDENCE_STALE"
    for artifact in (frame, failed):
        service.store.add_evidence(artifact.to_dict())
    try:
        yield Retained(home, service, frame, failed)
    finally:
        await service.aclose()
        service.store.close()


async def test_a_retained_frame_is_shown_downscaled_with_its_identity_and_no_path(
    retained: Retained,
) -> None:
    answer = await retained.read(retained.frame.artifact_id)
    frame = retained.frame
    assert (answer["taskId"], answer["artifactId"]) == (TASK, frame.artifact_id)
    assert (answer["source"], answer["phase"], answer["seq"]) == ("scene", "before", 7)
    assert answer["capturedAtNs"] == str(frame.captured_at_ns)
    assert answer["evidenceSha256"] == frame.sha256
    data = base64.b64decode(answer["image"]["data"])
    assert len(data) <= MAX_JPEG_BYTES
    assert data.startswith(b"\xff\xd8\xff")
    pixels = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
    assert pixels is not None
    assert pixels.shape[:2] == (answer["image"]["height"], answer["image"]["width"])
    assert (answer["image"]["originalWidth"], answer["image"]["originalHeight"]) == (640, 480)
    assert "evidence/" not in json.dumps(answer)
    assert str(retained.home.root) not in json.dumps(answer)


async def test_a_frame_whose_bytes_changed_is_refused_as_tampered(retained: Retained) -> None:
    original = retained.bytes_path.read_bytes()
    retained.bytes_path.write_bytes(original[:-1] + bytes([original[-1] ^ 0xFF]))
    with pytest.raises(ToolFailure) as flipped:
        await retained.read(retained.frame.artifact_id)
    retained.bytes_path.write_bytes(original + b"appended")
    with pytest.raises(ToolFailure) as grown:
        await retained.read(retained.frame.artifact_id)
    for refused in (flipped.value, grown.value):
        assert refused.code == "EVIDENCE_HASH_MISMATCH"
        assert refused.details == {"artifact_id": retained.frame.artifact_id}
        assert "evidence/" not in refused.message


async def test_a_frame_whose_bytes_vanished_or_escaped_is_refused(
    retained: Retained, tmp_path: Path
) -> None:
    outside = tmp_path / "elsewhere.png"
    retained.bytes_path.rename(outside)
    with pytest.raises(ToolFailure) as missing:
        await retained.read(retained.frame.artifact_id)
    # The same bytes behind a link out of the workspace: never followed.
    retained.bytes_path.symlink_to(outside)
    with pytest.raises(ToolFailure) as escaped:
        await retained.read(retained.frame.artifact_id)
    assert missing.value.code == "EVIDENCE_MISSING_FILE"
    assert escaped.value.code == "EVIDENCE_UNSAFE_PATH"
    assert str(tmp_path) not in missing.value.message + escaped.value.message


async def test_a_failed_capture_an_unknown_artifact_and_an_unknown_task_are_refused(
    retained: Retained,
) -> None:
    with pytest.raises(ToolFailure) as failed:
        await retained.read(retained.failed.artifact_id)
    with pytest.raises(ToolFailure) as unknown:
        await retained.read("ev-nope")
    with pytest.raises(ToolFailure) as no_task:
        await retained.read(retained.frame.artifact_id, task_id="task_nope")
    assert failed.value.code == "EVIDENCE_NOT_RETAINED"
    assert "EVIDENCE_STALE" in failed.value.message
    assert unknown.value.code == "EVIDENCE_NOT_FOUND"
    assert "forge_task_get" in unknown.value.message
    assert no_task.value.code == "PAOS_NOT_FOUND"
    assert no_task.value.retryable is False
