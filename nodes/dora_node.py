"""Thin Dora adapter around :class:`~nodes.provider.ProviderCore`.

Threading model (measured on dora-rs 1.1): one daemon thread blocks in ``for event in
node`` and hands each event to the asyncio loop with ``call_soon_threadsafe`` (a data
plane's :func:`~nodes.dataplane.event_thread_inputs` it handles itself, so a 100 Hz
topic nobody is looking at does not wake the loop per message); every ``send_output``
happens on the loop thread. A bounded semaphore caps in-flight inputs so
a slow provider pushes back on Dora's input queue instead of growing memory here.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

import pyarrow as pa

from doraforge.nodes.dataplane import DataPlane, event_thread_inputs
from doraforge.nodes.definition import EndpointDefinition, RunnerOptions
from doraforge.nodes.provider import ProviderCore

logger = logging.getLogger(__name__)

_PERMIT_POLL_S = 0.2
_PUMP_JOIN_S = 2.0


class DoraNodeLike(Protocol):
    """The part of ``dora.Node`` the adapter uses (``dora.testing.MockNode`` fits too)."""

    def __iter__(self) -> Any: ...

    def send_output(
        self, output_id: str, data: pa.Array, metadata: dict[str, Any] | None = None
    ) -> None: ...


class _Bridge:
    """Loop-side state shared with the event pump thread."""

    def __init__(self, loop: asyncio.AbstractEventLoop, permits: int) -> None:
        self.loop = loop
        self.permits = threading.BoundedSemaphore(permits)
        self.closing = threading.Event()
        self.stopped = asyncio.Event()
        self.stop_reason = ""

    def request_stop(self, reason: str) -> None:
        if not self.stopped.is_set():
            self.stop_reason = reason
            self.stopped.set()

    def to_loop(self, callback: Any, *args: object) -> bool:
        try:
            self.loop.call_soon_threadsafe(callback, *args)
        except RuntimeError:  # loop already closed: the node is shutting down
            return False
        return True


def _acquire(bridge: _Bridge) -> bool:
    while not bridge.permits.acquire(timeout=_PERMIT_POLL_S):
        if bridge.closing.is_set():
            return False
    return True


def _pump(
    events: Iterable[dict[str, Any]],
    bridge: _Bridge,
    core_submit: Any,
    request_input: str,
    plane: DataPlane | None = None,
) -> None:
    """Forward Dora events to the loop until STOP, the request input closing, or the end."""
    reason = "dora event stream ended"
    plane_inputs = plane.inputs if plane is not None else frozenset()
    direct = event_thread_inputs(plane) & plane_inputs
    try:
        for event in events:
            kind, event_id = event.get("type"), event.get("id")
            if kind == "INPUT" and event_id == request_input:
                if not _acquire(bridge):
                    return
                if not bridge.to_loop(core_submit, event.get("value")):
                    return
            elif kind == "INPUT" and event_id in direct:
                assert plane is not None
                plane.on_input(event_id, event.get("value"), event.get("metadata") or {})
            elif kind == "INPUT" and event_id in plane_inputs:
                assert plane is not None
                metadata = event.get("metadata") or {}
                if not bridge.to_loop(plane.on_input, event_id, event.get("value"), metadata):
                    return
            elif kind == "STOP":
                reason = "dora STOP"
                break
            elif kind == "INPUT_CLOSED" and event_id == request_input:
                reason = f"input {request_input!r} closed"
                break
            elif kind == "ERROR":
                logger.warning("dora error event: %s", event.get("error", event))
            if bridge.closing.is_set():
                return
    except Exception:
        logger.exception("dora event stream failed")
        reason = "dora event stream failed"
    bridge.to_loop(bridge.request_stop, reason)


async def _renew_periodically(core: ProviderCore) -> None:
    while True:
        await asyncio.sleep(core.seconds_until_due())
        core.tick()


async def serve(node: DoraNodeLike, definition: EndpointDefinition, options: RunnerOptions) -> int:
    """Run ``definition`` on ``node`` until Dora stops it; return the exit status (0)."""
    loop = asyncio.get_running_loop()
    bridge = _Bridge(loop, options.max_inflight_requests)
    output = options.response_output

    def publish(batch: pa.RecordBatch | pa.StructArray) -> None:
        row = batch.to_struct_array() if isinstance(batch, pa.RecordBatch) else batch
        node.send_output(output, row)

    def publish_data(
        output_id: str, value: pa.Array, metadata: Mapping[str, Any] | None = None
    ) -> None:
        # Data-plane producers may run in their own threads; every send stays on the loop.
        row = value.to_struct_array() if isinstance(value, pa.RecordBatch) else value
        bridge.to_loop(node.send_output, output_id, row, dict(metadata or {}))

    core = ProviderCore(definition, publish=publish, options=options)
    plane = definition.data_plane
    if plane is not None:
        plane.attach(publish_data)

    def submit(value: object) -> None:
        task = core.submit(value)
        if task is None:
            bridge.permits.release()
        else:
            task.add_done_callback(lambda _: bridge.permits.release())

    logger.info("endpoint %s starting as %s", definition.endpoint_id, core.endpoint_instance_id)
    core.start()
    renewals = loop.create_task(_renew_periodically(core))
    pump = threading.Thread(
        target=_pump,
        args=(node, bridge, submit, options.request_input, plane),
        name="dora-events",
        daemon=True,
    )
    pump.start()
    try:
        await bridge.stopped.wait()
        logger.info("endpoint %s stopping: %s", definition.endpoint_id, bridge.stop_reason)
    finally:
        bridge.closing.set()
        renewals.cancel()
        await asyncio.gather(renewals, return_exceptions=True)
        if plane is not None:
            plane.close()
        await core.stop()
    await asyncio.to_thread(pump.join, _PUMP_JOIN_S)
    return 0
