"""What a provider author supplies to the runner, and how the runner is tuned.

Importing this module never imports ``dora``: the Gateway's in-process test carrier builds
a ``ToolEndpointHandler`` straight from an :class:`EndpointDefinition`.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from forge_tool import (
    DEFAULT_MAX_MESSAGE_BYTES,
    ActionToolEndpoint,
    EndpointStatus,
    QueryToolEndpoint,
    SessionToolEndpoint,
    ToolEndpointDescriptor,
)

from doraforge.nodes.dataplane import DataPlane

type OperationImpl = QueryToolEndpoint | ActionToolEndpoint | SessionToolEndpoint
type StatusSource = Callable[[], EndpointStatus]

# A renewal faster than this would flood the Gateway whatever lease it grants.
MIN_RENEWAL_INTERVAL_S = 0.05


def new_endpoint_instance_id() -> str:
    """Return a fresh opaque process-start identity (``epinst-<32 hex>``)."""
    return f"epinst-{uuid.uuid4().hex}"


@dataclass(frozen=True)
class EndpointDefinition:
    """One logical ToolEndpoint: its descriptor and the forge-tool SPI objects behind it.

    ``operations`` maps every descriptor operation name to its implementation (the
    handler rejects a missing or undeclared one). ``status`` is an optional health
    snapshot source; without it the runner derives ``ready``/``busy`` from activity.
    ``endpoint_instance_id`` pins this process start's identity when the provider needs
    to know it (build the definition once per process start); ``None`` lets the runner
    mint a fresh one. ``data_plane`` receives the node's other Dora inputs and may
    publish on its other outputs (joint states, commands, images).
    """

    descriptor: ToolEndpointDescriptor
    operations: Mapping[str, OperationImpl]
    status: StatusSource | None = None
    endpoint_instance_id: str | None = None
    data_plane: DataPlane | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.descriptor, ToolEndpointDescriptor):
            raise TypeError("descriptor must be a ToolEndpointDescriptor")
        if not isinstance(self.operations, Mapping):
            raise TypeError("operations must be a mapping of operation name to endpoint")
        if self.status is not None and not callable(self.status):
            raise TypeError("status must be a callable returning EndpointStatus, or None")
        if self.endpoint_instance_id is not None and (
            not isinstance(self.endpoint_instance_id, str) or not self.endpoint_instance_id.strip()
        ):
            raise ValueError("endpoint_instance_id must be a non-empty string or None")

    @property
    def endpoint_id(self) -> str:
        """Return the stable logical endpoint id from the descriptor."""
        return self.descriptor.endpoint_id


def _positive_seconds(value: float, name: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{name} must be a number of seconds")
    if not math.isfinite(value) or value < MIN_RENEWAL_INTERVAL_S:
        raise ValueError(f"{name} must be finite and at least {MIN_RENEWAL_INTERVAL_S} s")


def _positive_int(value: int, name: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{name} must be a positive integer")


def _dora_id(value: str, name: str) -> None:
    if not isinstance(value, str) or not value or value != value.strip() or "/" in value:
        raise ValueError(f"{name} must be a non-empty Dora id without '/' or padding")


@dataclass(frozen=True)
class RunnerOptions:
    """Runner tuning; every field is validated and errors name the field.

    ``request_input`` receives Gateway requests and Registry responses;
    ``response_output`` carries everything the provider sends.
    """

    request_input: str = "tool_request"
    response_output: str = "tool_response"
    register_interval_s: float = 1.0
    status_interval_s: float = 1.0
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    max_inflight_requests: int = 1_024
    max_retained_executions: int = 1_024
    max_early_events: int = 32
    stop_grace_s: float = 1.0
    use_uvloop: bool = True

    def __post_init__(self) -> None:
        _dora_id(self.request_input, "request_input")
        _dora_id(self.response_output, "response_output")
        _positive_seconds(self.register_interval_s, "register_interval_s")
        _positive_seconds(self.status_interval_s, "status_interval_s")
        for name in (
            "max_message_bytes",
            "max_inflight_requests",
            "max_retained_executions",
            "max_early_events",
        ):
            _positive_int(getattr(self, name), name)
        if isinstance(self.stop_grace_s, bool) or not isinstance(self.stop_grace_s, int | float):
            raise TypeError("stop_grace_s must be a number of seconds")
        if not math.isfinite(self.stop_grace_s) or self.stop_grace_s < 0:
            raise ValueError("stop_grace_s must be finite and non-negative")
