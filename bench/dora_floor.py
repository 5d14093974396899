"""The Dora floor: a request/reply round trip between two bare Python nodes.

``python bench/dora_floor.py ping SOCKET`` listens on the Unix socket SOCKET and serves
rounds: for each line ``KIND N`` it sends N requests one at a time and answers one JSON
line with the latencies in seconds, so the benchmark can take this floor between rounds
of its subject without restarting Dora. ``python bench/dora_floor.py pong`` echoes every
input. KIND is ``binary`` (200 bytes, the floor) or ``toolmessage`` (a 200-byte Query
carried as the ten-column ``forge_msgs.ToolMessage`` row, not decoded: what the carrier
format costs). The node exits when the benchmark closes the socket or Dora says STOP.
"""

from __future__ import annotations

import json
import socket
import sys
import time
from typing import Any

import pyarrow as pa
from dora import Node

#: Seconds the ping node waits for the benchmark to connect before it gives up.
ACCEPT_TIMEOUT_S = 120


def _payload(kind: str) -> pa.Array:
    if kind == "binary":
        return pa.array([b"x" * 200])
    from doraforge.wire import toolcodec

    message = toolcodec.Outbound(
        message_type="tool.invoke.request",
        endpoint_id="mock",
        payload={
            "arguments": {"message": "x" * 200},
            "context": {
                "tool_id": "mock.echo",
                "implementation_id": "mock.echo.v1",
                "metadata": {},
            },
        },
        request_id="req-1",
        invocation_id="inv-1",
        attempt_id="att-1",
        endpoint_instance_id="epinst-1",
        operation="echo",
    )
    return toolcodec.encode(message, max_message_bytes=1_048_576)


def _round(node: Any, payload: pa.Array, count: int) -> list[float] | None:
    """``count`` sequential round trips; ``None`` when Dora stops the node first."""
    samples: list[float] = []
    while len(samples) < count:
        started = time.perf_counter()
        node.send_output("request", payload)
        while True:
            event = node.next()
            if event is None or event["type"] == "STOP":
                return None
            if event["type"] == "INPUT":
                break
        samples.append(time.perf_counter() - started)
    return samples


def ping(path: str) -> None:
    node = Node()
    payloads = {kind: _payload(kind) for kind in ("binary", "toolmessage")}
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as server:
        server.bind(path)
        server.listen(1)
        server.settimeout(ACCEPT_TIMEOUT_S)
        connection, _ = server.accept()
    with connection, connection.makefile("rw", encoding="utf-8") as stream:
        for line in stream:
            kind, count = line.split()
            samples = _round(node, payloads[kind], int(count))
            if samples is None:
                return
            stream.write(json.dumps(samples) + "\n")
            stream.flush()


def pong() -> None:
    node = Node()
    for event in node:
        if event["type"] == "STOP":
            break
        if event["type"] == "INPUT":
            node.send_output("reply", event["value"])


if __name__ == "__main__":
    if sys.argv[1] == "ping":
        ping(sys.argv[2])
    else:
        pong()
