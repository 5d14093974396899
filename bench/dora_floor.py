"""The Dora floor: a request/reply round trip between two bare Python nodes.

``python bench/dora_floor.py ping N OUT [KIND]`` sends N requests one at a time and writes
the latencies to OUT; ``python bench/dora_floor.py pong`` echoes every input. KIND is
``binary`` (200 bytes, the floor) or ``toolmessage`` (a 200-byte Query carried as the
ten-column ``forge_msgs.ToolMessage`` row, not decoded: what the carrier format costs).
"""

from __future__ import annotations

import json
import sys
import time

import pyarrow as pa
from dora import Node


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


def ping(count: int, out: str, kind: str) -> None:
    node = Node()
    payload = _payload(kind)
    samples: list[float] = []
    started = time.perf_counter()
    node.send_output("request", payload)
    for event in node:
        if event["type"] == "STOP":
            break
        if event["type"] != "INPUT":
            continue
        samples.append(time.perf_counter() - started)
        if len(samples) >= count:
            break
        started = time.perf_counter()
        node.send_output("request", payload)
    with open(out, "w", encoding="utf-8") as handle:
        json.dump(samples, handle)


def pong() -> None:
    node = Node()
    for event in node:
        if event["type"] == "STOP":
            break
        if event["type"] == "INPUT":
            node.send_output("reply", event["value"])


if __name__ == "__main__":
    if sys.argv[1] == "ping":
        ping(int(sys.argv[2]), sys.argv[3], sys.argv[4] if len(sys.argv) > 4 else "binary")
    else:
        pong()
