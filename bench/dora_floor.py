"""The Dora floor: a request/reply round trip between two bare Python nodes.

``python -m bench.dora_floor ping N OUT`` sends N 200-byte requests one at a time and
writes the latencies to OUT; ``python -m bench.dora_floor pong`` echoes every input.
"""

from __future__ import annotations

import json
import sys
import time

import pyarrow as pa
from dora import Node


def ping(count: int, out: str) -> None:
    node = Node()
    payload = pa.array([b"x" * 200])
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
        ping(int(sys.argv[2]), sys.argv[3])
    else:
        pong()
