"""Evidence: capture from a real Gateway's observations, the after window, bundle validation."""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import cv2
import httpx
import numpy as np
import pytest
from forge_msgs import Image

from doraforge.gateway.config import ImageSource, ObservationsConfig
from doraforge.gateway.core import Gateway
from doraforge.gateway.http import create_app
from doraforge.paos.client import ForgeToolClient
from doraforge.paos.evidence import (
    BundleReport,
    EvidenceArtifact,
    capture,
    contained,
    validate_bundle,
)
from tests.gateway.harness import mock_config
from tests.gateway.support import live_gateway

pytestmark = pytest.mark.anyio

TASK = "task-1"
OBSERVATIONS = ObservationsConfig(
    images=[
        ImageSource(source="scene", input="image_scene"),
        ImageSource(source="wrist", input="image_wrist"),
    ]
)


class CountingTransport(httpx.AsyncBaseTransport):
    """Wraps a transport; counts answered requests and signals each one."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self.inner = inner
        self.served = 0
        self.answered = asyncio.Event()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        self.served += 1
        self.answered.set()
        return response


@dataclasses.dataclass
class Cell:
    gateway: Gateway
    client: ForgeToolClient
    transport: CountingTransport
    workspace: Path

    def publish(
        self, pixels: np.ndarray, *, seq: int, stamp_ns: int, source: str = "scene"
    ) -> None:
        image = Image.from_numpy(pixels).to_arrow()
        metadata = {"seq": seq, "stamp_ns": stamp_ns}
        self.gateway.observations.on_input(f"image_{source}", image, metadata)

    async def capture(self, phase: str, **options: Any) -> EvidenceArtifact:
        arguments = {
            "workspace": self.workspace,
            "task_id": TASK,
            "revision_id": "rev-1",
            "record_id": "rec-1" if phase == "after" else None,
            "source": "scene",
            "phase": phase,
            "not_before_ns": None,
            "timeout_s": 5.0,
        }
        return await capture(self.client, **{**arguments, **options})


async def _capture_before(transport: httpx.MockTransport, workspace: Path) -> EvidenceArtifact:
    """A ``before`` scene capture through a client whose Gateway is ``transport``."""
    async with ForgeToolClient("http://127.0.0.1", transport=transport) as client:
        return await capture(
            client,
            workspace=workspace,
            task_id=TASK,
            revision_id="rev-1",
            record_id=None,
            source="scene",
            phase="before",
            not_before_ns=None,
        )


@asynccontextmanager
async def cell(tmp_path: Path) -> AsyncIterator[Cell]:
    """A real Gateway serving two camera sources, and a client over ASGI."""
    gateway = Gateway(mock_config(observations=OBSERVATIONS), send=lambda *_: None)
    transport = CountingTransport(httpx.ASGITransport(app=create_app(gateway)))
    async with ForgeToolClient("http://127.0.0.1", transport=transport) as client:
        yield Cell(gateway, client, transport, tmp_path / "workspace")


def scene(red: int) -> np.ndarray:
    """A 64x48 RGB frame with texture (a green ramp) and a given red level."""
    pixels = np.zeros((48, 64, 3), dtype=np.uint8)
    pixels[:, :, 0] = red
    pixels[:, :, 1] = np.arange(64, dtype=np.uint8)[None, :] * 4
    return pixels


def bundle_report(
    artifacts: list[EvidenceArtifact], workspace: Path, **options: Any
) -> BundleReport:
    arguments = {
        "workspace": workspace,
        "task_id": TASK,
        "required_sources": ["scene"],
        "window": {"rec-1": 0},
        "max_age_s": 5.0,
    }
    return validate_bundle(artifacts, **{**arguments, **options})


async def before_and_after(c: Cell) -> tuple[list[EvidenceArtifact], int]:
    """A before frame, an action that ends, an after frame; returns the terminal time."""
    c.publish(scene(40), seq=1, stamp_ns=time.time_ns())
    before = await c.capture("before")
    terminal_ns = time.time_ns()
    c.publish(scene(200), seq=2, stamp_ns=terminal_ns + 1)
    after = await c.capture("after", not_before_ns=terminal_ns)
    return [before, after], terminal_ns


# ---------------------------------------------------------------- capture


async def test_before_and_after_frames_are_retained_with_hash_geometry_and_identity(
    tmp_path: Path,
) -> None:
    async with cell(tmp_path) as c:
        (before, after), terminal_ns = await before_and_after(c)
    for artifact, seq in ((before, 1), (after, 2)):
        assert artifact.ok, artifact.error
        assert artifact.seq == seq
        assert (artifact.media_type, artifact.width, artifact.height) == ("image/png", 64, 48)
        assert artifact.path == f"evidence/{TASK}/{artifact.artifact_id}.png"
        data = (c.workspace / artifact.path).read_bytes()
        assert artifact.size == len(data)
        assert artifact.sha256 == hashlib.sha256(data).hexdigest()
        assert artifact.received_at_ns is not None
        assert artifact.captured_at_ns is not None
        assert artifact.received_at_ns >= artifact.captured_at_ns
    assert (before.phase, before.record_id) == ("before", None)
    assert (after.phase, after.record_id, after.revision_id) == ("after", "rec-1", "rev-1")
    assert after.captured_at_ns is not None
    assert after.captured_at_ns > terminal_ns
    decoded = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR)
    assert decoded is not None
    assert (decoded[:, :, 2] == 200).all()  # lossless PNG, red is channel 2 in BGR
    leftovers = [p.name for p in (c.workspace / "evidence" / TASK).iterdir()]
    assert before.path is not None
    assert after.path is not None
    assert sorted(leftovers) == sorted(Path(path).name for path in (before.path, after.path))


async def test_jpeg_evidence_is_checked_and_named_as_jpeg(tmp_path: Path) -> None:
    async with cell(tmp_path) as c:
        c.publish(scene(90), seq=5, stamp_ns=time.time_ns())
        artifact = await c.capture("before", fmt="jpeg")
    assert artifact.ok, artifact.error
    assert artifact.media_type == "image/jpeg"
    assert artifact.path is not None
    assert artifact.path.endswith(".jpg")


async def test_after_capture_waits_for_a_frame_newer_than_the_action_end(tmp_path: Path) -> None:
    async with cell(tmp_path) as c:
        terminal_ns = time.time_ns()
        c.publish(scene(40), seq=1, stamp_ns=terminal_ns - 1_000_000)
        pending = asyncio.ensure_future(c.capture("after", not_before_ns=terminal_ns))
        async with asyncio.timeout(5):
            await c.transport.answered.wait()  # the old frame has been read and refused
        assert not pending.done()
        c.publish(scene(200), seq=2, stamp_ns=terminal_ns + 5)
        artifact = await asyncio.wait_for(pending, timeout=10)
    assert artifact.ok, artifact.error
    assert artifact.seq == 2
    assert artifact.captured_at_ns == terminal_ns + 5
    assert c.transport.served >= 2


async def test_after_capture_without_a_newer_frame_fails_stale_and_writes_nothing(
    tmp_path: Path,
) -> None:
    async with cell(tmp_path) as c:
        terminal_ns = time.time_ns()
        c.publish(scene(40), seq=1, stamp_ns=terminal_ns)
        artifact = await c.capture("after", not_before_ns=terminal_ns, timeout_s=0.1)
    assert not artifact.ok
    assert artifact.error is not None
    assert artifact.error["code"] == "EVIDENCE_STALE"
    assert artifact.seq == 1  # the refused frame is named, not hidden
    assert (artifact.sha256, artifact.path, artifact.size) == (None, None, None)
    assert not (c.workspace / "evidence").exists()


async def test_no_frame_yet_is_a_recorded_failure_with_the_gateway_cause(tmp_path: Path) -> None:
    async with cell(tmp_path) as c:
        artifact = await c.capture("before", timeout_s=0.1)
    assert artifact.error is not None
    assert artifact.error["code"] == "EVIDENCE_CAPTURE_FAILED"
    cause = artifact.error["details"]
    assert (cause["status_code"], cause["code"]) == (503, "FORGE_OBSERVATION_NO_FRAME")
    assert artifact.seq is None


async def test_an_unknown_source_fails_at_once(tmp_path: Path) -> None:
    async with cell(tmp_path) as c:
        artifact = await c.capture("before", source="nope", timeout_s=5)
    assert artifact.error is not None
    assert artifact.error["details"]["code"] == "FORGE_OBSERVATION_UNKNOWN_SOURCE"
    assert c.transport.served == 1


async def test_a_transport_failure_is_recorded_with_unknown_remote_state(tmp_path: Path) -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    transport = httpx.MockTransport(refuse)
    artifact = await _capture_before(transport, tmp_path)
    assert artifact.error is not None
    assert artifact.error["code"] == "EVIDENCE_CAPTURE_FAILED"
    assert artifact.error["details"]["remote_state"] == "unknown"


async def test_bytes_that_contradict_their_media_type_are_refused(tmp_path: Path) -> None:
    jpeg = cv2.imencode(".jpg", scene(10))[1].tobytes()
    headers = {
        "content-type": "image/png",
        "x-frame-seq": "3",
        "x-frame-timestamp-ns": "10",
        "x-frame-received-ns": "11",
    }
    transport = httpx.MockTransport(lambda _r: httpx.Response(200, content=jpeg, headers=headers))
    artifact = await _capture_before(transport, tmp_path)
    assert artifact.error is not None
    assert artifact.error["code"] == "EVIDENCE_MEDIA_MISMATCH"
    assert artifact.seq == 3
    assert artifact.path is None


async def test_caller_bugs_raise_instead_of_recording(tmp_path: Path) -> None:
    async with cell(tmp_path) as c:
        with pytest.raises(ValueError, match="not_before_ns"):
            await c.capture("after")
        with pytest.raises(ValueError, match="task_id"):
            await c.capture("before", task_id="../escape")
        with pytest.raises(ValueError, match="phase"):
            await c.capture("during")


# ---------------------------------------------------------------- validation


async def test_a_complete_bundle_validates(tmp_path: Path) -> None:
    async with cell(tmp_path) as c:
        artifacts, terminal_ns = await before_and_after(c)
    report = bundle_report(artifacts, c.workspace, window={"rec-1": terminal_ns})
    assert report.ok, report.problems
    assert report.problems == []


async def test_bytes_altered_on_disk_fail_the_rehash(tmp_path: Path) -> None:
    async with cell(tmp_path) as c:
        artifacts, terminal_ns = await before_and_after(c)
    assert artifacts[1].path is not None
    target = c.workspace / artifacts[1].path
    data = bytearray(target.read_bytes())
    data[-20] ^= 0xFF
    target.write_bytes(bytes(data))
    report = bundle_report(artifacts, c.workspace, window={"rec-1": terminal_ns})
    assert not report.ok
    assert report.problems == [
        {
            "code": "EVIDENCE_HASH_MISMATCH",
            "message": f"{artifacts[1].path} bytes changed",
            "artifact_id": artifacts[1].artifact_id,
        }
    ]


async def test_a_removed_file_is_missing(tmp_path: Path) -> None:
    async with cell(tmp_path) as c:
        artifacts, terminal_ns = await before_and_after(c)
    assert artifacts[0].path is not None
    (c.workspace / artifacts[0].path).unlink()
    report = bundle_report(artifacts, c.workspace, window={"rec-1": terminal_ns})
    assert report.codes() == {"EVIDENCE_MISSING_FILE"}
    assert report.problems[0]["artifact_id"] == artifacts[0].artifact_id


async def test_a_blank_frame_is_refused(tmp_path: Path) -> None:
    async with cell(tmp_path) as c:
        c.publish(np.full((48, 64, 3), 30, np.uint8), seq=1, stamp_ns=time.time_ns())
        blank = await c.capture("before")
    assert blank.ok  # capture records it; validation judges it
    report = bundle_report([blank], c.workspace, window={})
    assert "EVIDENCE_BLANK" in report.codes()


async def test_a_frame_old_when_read_is_stale(tmp_path: Path) -> None:
    async with cell(tmp_path) as c:
        c.publish(scene(40), seq=1, stamp_ns=time.time_ns() - 30 * 10**9)
        old = await c.capture("before")
    assert old.ok
    report = bundle_report([old], c.workspace, window={}, max_age_s=1.0)
    assert "EVIDENCE_STALE" in report.codes()
    assert bundle_report([old], c.workspace, window={}, max_age_s=60.0).codes() == {
        "EVIDENCE_MISSING_SOURCE"  # only the after frame is missing
    }


async def test_an_after_frame_older_than_the_action_end_is_out_of_window(tmp_path: Path) -> None:
    async with cell(tmp_path) as c:
        artifacts, terminal_ns = await before_and_after(c)
    assert artifacts[1].captured_at_ns is not None
    late_action = {"rec-1": artifacts[1].captured_at_ns + 1}
    report = bundle_report(artifacts, c.workspace, window=late_action)
    assert report.codes() == {"EVIDENCE_OUT_OF_WINDOW"}
    assert any(p.get("artifact_id") == artifacts[1].artifact_id for p in report.problems)
    unknown_record = bundle_report(artifacts, c.workspace, window={"rec-9": terminal_ns})
    assert unknown_record.codes() == {"EVIDENCE_OUT_OF_WINDOW"}


async def test_a_required_source_needs_a_successful_before_and_after(tmp_path: Path) -> None:
    async with cell(tmp_path) as c:
        artifacts, terminal_ns = await before_and_after(c)
        failed_wrist = await c.capture("after", source="wrist", not_before_ns=0, timeout_s=0.05)
    assert not failed_wrist.ok
    report = bundle_report(
        [*artifacts, failed_wrist],
        c.workspace,
        window={"rec-1": terminal_ns},
        required_sources=["scene", "wrist"],
    )
    assert report.codes() == {"EVIDENCE_MISSING_SOURCE"}
    assert len(report.problems) == 2  # wrist before and wrist after


async def test_artifacts_of_another_task_are_foreign(tmp_path: Path) -> None:
    async with cell(tmp_path) as c:
        artifacts, terminal_ns = await before_and_after(c)
    moved = dataclasses.replace(artifacts[0], task_id="task-2")
    report = bundle_report([moved, artifacts[1]], c.workspace, window={"rec-1": terminal_ns})
    assert {"EVIDENCE_FOREIGN", "EVIDENCE_MISSING_SOURCE"} == report.codes()
    borrowed = dataclasses.replace(artifacts[0], path="evidence/task-2/x.png")
    assert "EVIDENCE_FOREIGN" in bundle_report([borrowed], c.workspace, window={}).codes()


async def test_paths_that_escape_the_workspace_are_refused(tmp_path: Path) -> None:
    async with cell(tmp_path) as c:
        artifacts, terminal_ns = await before_and_after(c)
    # A sibling whose name shares the workspace's prefix: a string check would pass it.
    sibling = c.workspace.parent / f"{c.workspace.name}-evil"
    sibling.mkdir()
    outside = sibling / "frame.png"
    assert artifacts[0].path is not None
    outside.write_bytes((c.workspace / artifacts[0].path).read_bytes())
    link = c.workspace / "evidence" / TASK / "link.png"
    link.symlink_to(outside)
    linked = dataclasses.replace(artifacts[0], path=f"evidence/{TASK}/link.png")
    dotted = dataclasses.replace(artifacts[1], path=f"evidence/{TASK}/../../../x.png")
    report = bundle_report([linked, dotted], c.workspace, window={"rec-1": terminal_ns})
    unsafe = [p["artifact_id"] for p in report.problems if p["code"] == "EVIDENCE_UNSAFE_PATH"]
    assert unsafe == [linked.artifact_id, dotted.artifact_id]


def test_containment_is_by_resolved_components(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    (workspace / "evidence").mkdir(parents=True)
    (tmp_path / "ws2").mkdir()
    (workspace / "evidence" / "out").symlink_to(tmp_path / "ws2")
    assert contained(workspace, "evidence/a.png") == (workspace / "evidence/a.png").resolve()
    for bad in ("/etc/passwd", "../ws2/a.png", "evidence/out/a.png", "", "a\x00b"):
        with pytest.raises(ValueError, match="evidence path"):
            contained(workspace, bad)


def test_an_artifact_round_trips_through_its_dict() -> None:
    artifact = EvidenceArtifact("ev-1", TASK, "rev-1", None, "scene", "before", seq=3)
    assert EvidenceArtifact.from_dict(artifact.to_dict()) == artifact


async def test_capture_over_a_real_socket(tmp_path: Path) -> None:
    gateway = Gateway(mock_config(observations=OBSERVATIONS), send=lambda *_: None)
    stamp = time.time_ns()
    image = Image.from_numpy(scene(120)).to_arrow()
    gateway.observations.on_input("image_wrist", image, {"seq": 9, "stamp_ns": stamp})
    with live_gateway(gateway) as live:
        async with ForgeToolClient(live.url) as client:
            sources = await client.image_sources()
            artifact = await capture(
                client,
                workspace=tmp_path,
                task_id=TASK,
                revision_id="rev-1",
                record_id="rec-1",
                source="wrist",
                phase="after",
                not_before_ns=stamp - 1,
            )
    assert {item["source"]: item["latest"] is not None for item in sources} == {
        "scene": False,
        "wrist": True,
    }
    assert artifact.ok, artifact.error
    assert (artifact.seq, artifact.captured_at_ns) == (9, stamp)
    assert artifact.gateway_received_at_ns is not None
    assert artifact.gateway_received_at_ns >= stamp
