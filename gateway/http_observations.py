"""Observation routes: latest camera frames over HTTP, image and state streams over WebSocket.

The WebSocket shapes follow the upstream Forge Gateway that PhyAgentOS evidence capture
reads: ``{"type": "image", "id": source, "seq", "timestamp", "content_type", "data"}``.
Each client gets the newest frame at most ``ws_image_max_hz`` times a second; a slow
client simply skips frames, it never queues them and never slows the Dora thread.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from fastapi import Request, WebSocket, WebSocketDisconnect
from fastapi.responses import Response
from fastapi.routing import APIRoute, APIWebSocketRoute
from starlette.requests import HTTPConnection
from starlette.routing import BaseRoute

from doraforge.gateway.config import ObservationsConfig
from doraforge.gateway.errors import InvalidRequest, NotFound, Unavailable
from doraforge.gateway.observations import Frame, ObservationStore, content_type
from doraforge.gateway.openapi import Envelope, media, responses, success

_KEEPALIVE_S = 5.0


@dataclass(frozen=True)
class Observations:
    """What the observation routes read, as ``app.state.observations``."""

    store: ObservationStore
    config: ObservationsConfig


def observations_of(connection: HTTPConnection) -> Observations:
    """The observation state of the app serving ``connection`` (HTTP or WebSocket)."""
    observations: Observations = connection.app.state.observations
    return observations


async def list_sources(request: Request) -> Response:
    store = observations_of(request).store
    sources = []
    for name in store.sources:
        frame = store.latest_frame(name)
        sources.append({"source": name, "latest": None if frame is None else _meta(frame)})
    return _json({"ok": True, "data": {"sources": sources}})


async def latest_image(request: Request, source: str, format: str | None = None) -> Response:
    observed = observations_of(request)
    store, config = observed.store, observed.config
    fmt = format or config.image_format
    if fmt not in ("png", "jpeg"):
        raise InvalidRequest("FORGE_OBSERVATION_INVALID_FORMAT", "format is png or jpeg")
    frame = _frame(store, source)
    body = await asyncio.to_thread(frame.encoded, fmt, config.jpeg_quality)
    return Response(body, media_type=content_type(fmt), headers=_frame_headers(frame))


async def latest_state(request: Request) -> Response:
    seq, state = observations_of(request).store.latest_state()
    if state is None:
        raise Unavailable("FORGE_OBSERVATION_NO_STATE", "no joint state received yet")
    return _json({"ok": True, "data": {"seq": seq, "joint_state": state}})


async def ws_images(websocket: WebSocket) -> None:
    observed = observations_of(websocket)
    store, config = observed.store, observed.config
    wanted = _requested_sources(websocket, store)
    sent: dict[str, int] = {}

    async def send_new() -> None:
        for name in wanted:
            frame = store.latest_frame(name)
            if frame is not None and sent.get(name) != frame.seq:
                await websocket.send_text(await _image_message(frame, config))
                sent[name] = frame.seq

    await _stream(websocket, store, send_new, 1.0 / config.ws_image_max_hz)


async def ws_state(websocket: WebSocket) -> None:
    observed = observations_of(websocket)
    store, config = observed.store, observed.config
    last = [-1]

    async def send_new() -> None:
        seq, state = store.latest_state()
        if state is not None and seq != last[0]:
            message = {"type": "state", "seq": seq, "joint_state": state}
            await websocket.send_text(json.dumps(message))
            last[0] = seq

    await _stream(websocket, store, send_new, 1.0 / config.ws_state_max_hz)


#: ``/observations/*`` over HTTP, ``/ws/images`` and ``/ws/state`` over WebSocket.
OBSERVATION_ROUTES: list[BaseRoute] = [
    APIRoute(
        "/observations/images",
        list_sources,
        methods=["GET"],
        summary="Camera sources and their latest frame",
        responses=responses({200: success(Envelope, "Each source and its newest frame")}),
    ),
    APIRoute(
        "/observations/images/{source}/latest",
        latest_image,
        methods=["GET"],
        summary="The newest frame as PNG/JPEG",
        response_class=Response,
        responses=responses(
            {200: media("The newest frame", "image/png", "image/jpeg")}, [400, 404, 503]
        ),
    ),
    APIRoute(
        "/observations/state",
        latest_state,
        methods=["GET"],
        summary="The newest joint state",
        responses=responses({200: success(Envelope, "The newest joint state")}, [503]),
    ),
    APIWebSocketRoute("/ws/images", ws_images),
    APIWebSocketRoute("/ws/state", ws_state),
]


def _frame(store: ObservationStore, source: str) -> Frame:
    if source not in store.sources:
        raise NotFound("FORGE_OBSERVATION_UNKNOWN_SOURCE", f"no camera source {source!r}")
    frame = store.latest_frame(source)
    if frame is None:
        raise Unavailable("FORGE_OBSERVATION_NO_FRAME", f"no frame from {source!r} yet")
    return frame


def _requested_sources(websocket: WebSocket, store: ObservationStore) -> list[str]:
    raw = websocket.query_params.get("sources")
    if not raw:
        return store.sources
    return [name for name in raw.split(",") if name in store.sources]


async def _image_message(frame: Frame, config: ObservationsConfig) -> str:
    fmt = config.image_format
    data = await asyncio.to_thread(frame.encoded, fmt, config.jpeg_quality)
    return json.dumps(
        {
            "type": "image",
            "id": frame.source,
            "seq": frame.seq,
            "timestamp": frame.stamp_ns / 1e9,
            # Nanosecond clocks exceed JSON's interoperable integers (2^53): a decimal string.
            "timestamp_ns": str(frame.stamp_ns),
            "width": frame.width,
            "height": frame.height,
            "content_type": content_type(fmt),
            "data": base64.b64encode(data).decode("ascii"),
        }
    )


async def _stream(
    websocket: WebSocket,
    store: ObservationStore,
    send_new: Callable[[], Awaitable[None]],
    period: float,
) -> None:
    """Send what is new, at most once per ``period``, until the client goes away."""
    await websocket.accept()
    closed = asyncio.ensure_future(_until_closed(websocket))
    try:
        while not closed.done():
            started, seen = time.monotonic(), store.version
            await send_new()
            await _pace(store, started, period, closed, seen)
    except (WebSocketDisconnect, RuntimeError):
        return  # the client left mid-send
    finally:
        closed.cancel()


async def _until_closed(websocket: WebSocket) -> None:
    # Reading is how a server notices a close frame; clients have nothing else to say.
    while (await websocket.receive())["type"] != "websocket.disconnect":
        continue


async def _pace(
    store: ObservationStore,
    started: float,
    period: float,
    closed: asyncio.Future[None],
    seen: int,
) -> None:
    # Never faster than the configured rate; otherwise wake as soon as something changes
    # after ``seen`` (a frame stored while the stream was sending or pacing is not missed).
    remaining = period - (time.monotonic() - started)
    if remaining > 0:
        await asyncio.wait([closed], timeout=remaining)
    if closed.done():
        return
    changed = asyncio.ensure_future(store.wait_changed(_KEEPALIVE_S, seen))
    await asyncio.wait([changed, closed], return_when=asyncio.FIRST_COMPLETED)
    changed.cancel()


def _meta(frame: Frame) -> dict[str, Any]:
    # Nanosecond stamps exceed JSON's interoperable integers (2^53), so they travel as
    # decimal strings, as int64 does in protobuf's JSON mapping.
    return {
        "seq": frame.seq,
        "stamp_ns": str(frame.stamp_ns),
        "received_ns": str(frame.received_ns),
        "width": frame.width,
        "height": frame.height,
        "encoding": frame.encoding,
    }


def _frame_headers(frame: Frame) -> dict[str, str]:
    return {
        "X-Frame-Source": frame.source,
        "X-Frame-Seq": str(frame.seq),
        "X-Frame-Timestamp-Ns": str(frame.stamp_ns),
        "X-Frame-Received-Ns": str(frame.received_ns),
        "Cache-Control": "no-store",
    }


def _json(payload: Any) -> Response:
    return Response(json.dumps(payload, separators=(",", ":")), media_type="application/json")
