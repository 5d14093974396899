"""The data-plane seam of a provider node: high-rate topics beside the tool messages.

A provider that talks to a robot (joint states in, joint commands out, camera frames)
declares a :class:`DataPlane` in its :class:`~nodes.definition.EndpointDefinition`. The
runner delivers the declared Dora inputs to ``on_input`` on the event-loop thread and
hands the plane a :data:`Publish` callable that is safe to call from any thread.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

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
