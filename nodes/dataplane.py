"""The data-plane seam of a provider node: high-rate topics beside the tool messages.

A provider that talks to a robot (joint states in, joint commands out, camera frames)
declares a :class:`DataPlane` in its :class:`~nodes.definition.EndpointDefinition`. The
runner delivers the declared Dora inputs to ``on_input`` on the event-loop thread and
hands the plane a :data:`Publish` callable that is safe to call from any thread. A plane
that also has :class:`EventThreadInputs` gets those inputs on the Dora event thread
instead: for high-rate topics whose handling is one thread-safe store.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol, runtime_checkable

import pyarrow as pa

#: ``publish(output_id, value, metadata)``; callable from any thread.
type Publish = Callable[[str, pa.Array, Mapping[str, Any] | None], None]


class DataPlane(Protocol):
    """Business-side handling of a node's non-tool Dora inputs and outputs."""

    @property
    def inputs(self) -> frozenset[str]:
        """The Dora input ids this plane consumes."""
        ...

    def attach(self, publish: Publish) -> None:
        """Receive the publisher once, on the loop thread, before any input."""
        ...

    def on_input(self, input_id: str, value: pa.Array, metadata: Mapping[str, Any]) -> None:
        """Handle one input event on the loop thread; must not block."""
        ...

    def close(self) -> None:
        """Stop background work (threads, timers) when the node stops."""
        ...


@runtime_checkable
class EventThreadInputs(Protocol):
    """A plane whose ``on_input`` is safe and quick on the Dora event thread for some
    inputs (it stores a reference and returns; decoding waits for a reader)."""

    @property
    def event_thread_inputs(self) -> frozenset[str]:
        """The input ids delivered on the Dora event thread, not the loop."""
        ...


def event_thread_inputs(plane: object) -> frozenset[str]:
    """The inputs ``plane`` takes on the Dora event thread (none unless it says so)."""
    return plane.event_thread_inputs if isinstance(plane, EventThreadInputs) else frozenset()
