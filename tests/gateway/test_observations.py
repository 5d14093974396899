"""Observations: latest frames over HTTP and WebSocket, joint state, bounded and newest-first."""

from __future__ import annotations

import asyncio
import base64
import json

import cv2
import numpy as np
import pyarrow as pa
import pytest
from forge_msgs import Image, JointState
from websockets.sync.client import connect

from doraforge.gateway.config import ImageSource, ObservationsConfig
from doraforge.gateway.core import Gateway
from tests.gateway.harness import mock_config
from tests.gateway.support import live_gateway

OBSERVATIONS = ObservationsConfig(
    images=[ImageSource(source="scene", input="image_scene")],
    joint_state_input="joint_state",
)


def frame(value: int) -> np.ndarray:
    pixels = np.zeros((48, 64, 3), dtype=np.uint8)
    pixels[:, :, 0] = value  # red channel, in RGB order
    return pixels


@pytest.fixture
def gateway() -> Gateway:
    return Gateway(mock_config(observations=OBSERVATIONS), send=lambda *_: None)


def publish(gateway: Gateway, value: int, seq: int) -> None:
    image = Image.from_numpy(frame(value)).to_arrow()
    gateway.observations.on_input("image_scene", image, {"seq": seq, "stamp_ns": 1_000 + seq})


def test_latest_frame_is_served_as_jpeg_with_its_sequence_and_timestamp(gateway: Gateway) -> None:
    publish(gateway, 200, seq=1)
    publish(gateway, 90, seq=2)
    with live_gateway(gateway) as server, server.client() as client:
        response = client.get("/observations/images/scene/latest")
    assert response.status_code == 200
    assert response.headers["content-type"] == "image/jpeg"
    assert response.headers["x-frame-seq"] == "2"
    assert response.headers["x-frame-timestamp-ns"] == "1002"
    decoded = cv2.imdecode(np.frombuffer(response.content, np.uint8), cv2.IMREAD_COLOR)
    assert decoded is not None
    assert decoded.shape == (48, 64, 3)
    assert abs(int(decoded[:, :, 2].mean()) - 90) < 4  # BGR on decode: red is channel 2


def test_png_is_lossless(gateway: Gateway) -> None:
    publish(gateway, 123, seq=7)
    with live_gateway(gateway) as server, server.client() as client:
        response = client.get("/observations/images/scene/latest?format=png")
    decoded = cv2.imdecode(np.frombuffer(response.content, np.uint8), cv2.IMREAD_COLOR)
    assert decoded is not None
    assert response.headers["content-type"] == "image/png"
    assert (decoded[:, :, 2] == 123).all()


def test_unknown_source_is_404_and_no_frame_yet_is_503(gateway: Gateway) -> None:
    with live_gateway(gateway) as server, server.client() as client:
        missing = client.get("/observations/images/nope/latest")
        empty = client.get("/observations/images/scene/latest")
        bad = client.get("/observations/images/scene/latest?format=gif")
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "FORGE_OBSERVATION_UNKNOWN_SOURCE"
    assert empty.status_code == 503
    assert empty.json()["error"]["retryable"] is True
    assert bad.status_code == 400


def test_malformed_observations_are_dropped_and_counted(gateway: Gateway) -> None:
    gateway.observations.on_input("image_scene", JointState(name=["j"]).to_arrow(), {})
    assert gateway.observations.dropped == 1
    assert gateway.observations.latest_frame("scene") is None


def test_ws_images_sends_the_newest_frame_in_the_upstream_shape(gateway: Gateway) -> None:
    publish(gateway, 50, seq=3)
    publish(gateway, 60, seq=4)
    with live_gateway(gateway) as server, connect(server.ws_url("/ws/images")) as websocket:
        message = json.loads(websocket.recv(timeout=10))
    assert message["type"] == "image"
    assert message["id"] == "scene"
    assert message["seq"] == 4
    assert message["content_type"] == "image/jpeg"
    assert message["timestamp"] == pytest.approx(1004 / 1e9)
    pixels = cv2.imdecode(np.frombuffer(base64.b64decode(message["data"]), np.uint8), 1)
    assert pixels is not None
    assert pixels.shape == (48, 64, 3)


def test_ws_state_and_http_state_report_the_latest_joint_state(gateway: Gateway) -> None:
    state = JointState(name=["a", "b"], position=[0.1, 0.2], velocity=[0.0, 0.0]).to_arrow()
    gateway.observations.on_input("joint_state", state, {})
    with live_gateway(gateway) as server, server.client() as client:
        http = client.get("/observations/state").json()["data"]
        with connect(server.ws_url("/ws/state")) as websocket:
            message = json.loads(websocket.recv(timeout=10))
    assert http["joint_state"]["position"] == [0.1, 0.2]
    assert message["type"] == "state"
    assert message["joint_state"]["name"] == ["a", "b"]


def test_nanosecond_stamps_travel_as_strings_so_the_json_stays_interoperable(
    gateway: Gateway,
) -> None:
    from doraforge.wire import strict_json

    stamp = 1_796_000_000_123_456_789  # a real wall-clock stamp: far beyond 2^53
    image = Image.from_numpy(frame(10)).to_arrow()
    gateway.observations.on_input("image_scene", image, {"seq": 3, "stamp_ns": stamp})
    with live_gateway(gateway) as server, server.client() as client:
        listing = strict_json.loads(client.get("/observations/images").content)
    latest = listing["data"]["sources"][0]["latest"]
    assert latest["stamp_ns"] == str(stamp)
    assert int(latest["received_ns"]) > 0


class RecordingLoop:
    def __init__(self) -> None:
        self.calls = 0

    def call_soon_threadsafe(self, *_: object) -> None:
        self.calls += 1


def test_unwatched_joint_state_is_kept_undecoded_and_wakes_no_loop(gateway: Gateway) -> None:
    store = gateway.observations
    loop = RecordingLoop()
    store.bind_loop(loop)  # type: ignore[arg-type]
    for position in (0.1, 0.2, 0.3):
        store.on_input("joint_state", JointState(name=["a"], position=[position]).to_arrow(), {})
    assert loop.calls == 0
    seq, state = store.latest_state()
    assert (seq, state["position"] if state else None) == (3, [0.3])


def test_a_joint_state_without_its_columns_is_dropped_on_arrival(gateway: Gateway) -> None:
    gateway.observations.on_input("joint_state", pa.array([1.0]), {})
    assert gateway.observations.dropped == 1
    assert gateway.observations.latest_state() == (0, None)


def test_a_malformed_newest_joint_state_leaves_the_last_good_one(gateway: Gateway) -> None:
    store = gateway.observations
    store.on_input("joint_state", JointState(name=["a"], position=[0.5]).to_arrow(), {})
    assert store.latest_state()[0] == 1
    bad = pa.record_batch({"name": [["a", "b"]], "position": [["x"]]})
    store.on_input("joint_state", bad, {})
    seq, state = store.latest_state()
    assert (seq, state["position"] if state else None) == (1, [0.5])
    assert store.dropped == 1
    assert store.latest_state()[0] == 1
    assert store.dropped == 1


@pytest.mark.anyio
async def test_a_change_before_the_wait_began_ends_it_at_once(gateway: Gateway) -> None:
    store = gateway.observations
    store.bind_loop(asyncio.get_running_loop())
    seen = store.version
    publish(gateway, 10, seq=1)  # stored while the stream was busy sending
    await asyncio.wait_for(store.wait_changed(30.0, seen), timeout=5)


@pytest.mark.anyio
async def test_a_watched_store_wakes_its_waiter(gateway: Gateway) -> None:
    store = gateway.observations
    loop = asyncio.get_running_loop()
    store.bind_loop(loop)
    waiter = asyncio.ensure_future(store.wait_changed(30.0, store.version))
    await asyncio.sleep(0)  # let the waiter register
    await asyncio.to_thread(publish, gateway, 20, 2)  # from another thread, as Dora does
    await asyncio.wait_for(waiter, timeout=5)
