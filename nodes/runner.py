"""Run a forge-tool ToolEndpoint as a Dora node.

Provider authors write forge-tool SPI classes (Query/Action/Session) and a descriptor,
wrap them in an :class:`EndpointDefinition`, and call :func:`run_endpoint` from their
node's ``main()``::

    def main() -> int:
        return run_endpoint(my_definition(), options=RunnerOptions())

The runner owns what every provider needs: a fresh ``endpoint_instance_id`` per process
start, immediate and periodic ``endpoint.register`` (lease renewal), Registry response
handling, periodic ``endpoint.status``, concurrent dispatch with response-first event
publication, and a best-effort ``endpoint.unregister`` on Dora STOP.

Dora ids (configurable through :class:`RunnerOptions`): input ``tool_request`` carries
Gateway requests and Registry responses; output ``tool_response`` carries everything
the provider sends. This module imports ``dora`` only inside :func:`run_endpoint`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from doraforge.nodes.definition import (
    EndpointDefinition,
    OperationImpl,
    RunnerOptions,
    StatusSource,
    new_endpoint_instance_id,
)
from doraforge.nodes.dora_node import serve
from doraforge.nodes.provider import Clock, ProviderCore, Publish
from doraforge.nodes.registration import RegistrationState

__all__ = [
    "Clock",
    "EndpointDefinition",
    "OperationImpl",
    "ProviderCore",
    "Publish",
    "RegistrationState",
    "RunnerOptions",
    "StatusSource",
    "new_endpoint_instance_id",
    "run_endpoint",
]


def _loop_factory(options: RunnerOptions) -> Callable[[], asyncio.AbstractEventLoop] | None:
    if not options.use_uvloop:
        return None
    try:
        import uvloop
    except ImportError:  # uvloop is optional (absent on Windows)
        return None
    return uvloop.new_event_loop


def run_endpoint(
    definition: EndpointDefinition,
    *,
    options: RunnerOptions | None = None,
    node: Any | None = None,
) -> int:
    """Serve ``definition`` as a Dora node until STOP; return the process exit status.

    ``node`` defaults to a fresh ``dora.Node()``; pass ``dora.testing.MockNode`` (or any
    object with ``__iter__`` and ``send_output``) to run without a daemon. Blocks the
    calling thread, which becomes the event loop thread.
    """
    options = options or RunnerOptions()
    if node is None:
        from dora import Node

        node = Node()
    with asyncio.Runner(loop_factory=_loop_factory(options)) as runner:
        return runner.run(serve(node, definition, options))
