"""``doraforge demo --mock``: the Tool API lifecycle against the scriptable mock provider.

It starts a private copy of ``dataflows/mock.yml`` (Gateway + mock provider) in a
temporary directory under ``dora run``, then makes one Query, one Action that completes,
one Action that is cancelled mid-motion and one Session that is stopped, printing what
happened at each step. The Gateway runs with a token generated for the run (secure by
default), which every request presents.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import httpx

from doraforge.dataflows import dataflow
from doraforge.paos.gateway_auth import bearer, dataflow_auth, http_client
from doraforge.skill_runtime.dora_run import (
    Dataflow,
    dora_environment,
    free_port,
    private_copy,
    wait_until,
)

_STARTUP_TIMEOUT_S = 90.0
_STEP_TIMEOUT_S = 30.0


class DemoFailure(RuntimeError):
    """A demo step did not behave as the contract says."""


def say(text: str) -> None:
    """Print one line of the demo narrative."""
    print(text, flush=True)


def run_mock_demo(port: int | None = None, *, environ: Mapping[str, str]) -> int:
    """Run the whole demo on ``environ`` (the caller's environment); return a process exit
    status."""
    port = port or free_port()
    with (
        tempfile.TemporaryDirectory(prefix="doraforge-demo-") as tmp,
        dataflow_auth(environ, generate=True) as auth,
    ):
        log_path = Path(tmp) / "dataflow.log"
        env = dora_environment(
            auth.environment(environ),
            DORAFORGE_GATEWAY_PORT=str(port),
            DORAFORGE_GATEWAY_JOURNAL=str(Path(tmp) / "gateway.journal"),
            DORAFORGE_LOG_LEVEL="WARNING",
        )
        # A private copy: `dora run` writes its out/ logs next to the dataflow file.
        mock = private_copy(dataflow("mock"), Path(tmp) / "dataflow")
        with log_path.open("wb") as log, Dataflow(mock, env, log):
            base = f"http://127.0.0.1:{port}"
            try:
                _wait_for_gateway(base, auth.token)
                say(f"  Gateway authentication: {auth.mode}")
                with http_client(base, auth.token) as client:
                    _refuses_no_token(base)
                    _walk_through(client)
            except (DemoFailure, httpx.HTTPError, TimeoutError) as exc:
                say(f"\nDEMO FAILED: {exc}")
                say("--- last lines of the dataflow log ---")
                say("\n".join(log_path.read_text(errors="replace").splitlines()[-30:]))
                return 1
        say("\ndataflow stopped cleanly. Demo complete.")
    return 0


def _wait_for_gateway(base: str, token: str | None) -> None:
    say(f"starting dataflows/mock.yml with `dora run` (Gateway on {base}) ...")

    def ready() -> bool:
        try:
            response = httpx.get(
                f"{base}/tools/mock.move/context", headers=bearer(token), timeout=1
            )
        except httpx.HTTPError:
            return False
        return response.status_code == 200 and response.json()["data"]["ready"]

    def progress(elapsed: float) -> None:
        sys.stdout.write(f"\r  waiting for the Gateway and the mock endpoint ... {elapsed:4.1f}s")
        sys.stdout.flush()

    try:
        up = wait_until(ready, _STARTUP_TIMEOUT_S, interval_s=0.2, on_wait=progress)
    except BaseException:  # Ctrl-C/SIGTERM mid-wait: end the progress line before the reason
        sys.stdout.write("\n")
        raise
    if not up:
        sys.stdout.write("\n")
        raise TimeoutError(f"the mock endpoint was not ready within {_STARTUP_TIMEOUT_S:.0f} s")
    say("\r  Gateway up, mock endpoint registered and ready.                ")


def _refuses_no_token(base: str) -> None:
    # Shown, not assumed: the same request without the token is turned away.
    status = httpx.get(f"{base}/tools", timeout=5).status_code
    say(f"  GET /tools without the token -> HTTP {status}")
    if status != 401:
        raise DemoFailure(f"the Gateway answered {status} without a token, expected 401")


def _walk_through(client: httpx.Client) -> None:
    _discover(client)
    _query(client)
    _action_to_completion(client)
    _action_cancelled(client)
    _session(client)


def _data(response: httpx.Response, status: int) -> dict[str, Any]:
    if response.status_code != status:
        raise DemoFailure(
            f"{response.request.url.path}: HTTP {response.status_code} {response.text}"
        )
    data = response.json()["data"]
    if not isinstance(data, dict):
        raise DemoFailure(f"{response.request.url.path}: the envelope's data is not an object")
    return data


def _discover(client: httpx.Client) -> None:
    tools = _data(client.get("/tools"), 200)["tools"]
    say(f"\n1. discovery: {len(tools)} tools")
    for tool in tools:
        say(f"   - {tool['tool_id']:12s} {tool['semantics']:8s} {tool['description']}")


def _query(client: httpx.Client) -> None:
    started = time.perf_counter()
    body = {"arguments": {"message": "hello, robot"}, "caller_id": "demo:query"}
    data = _data(client.post("/tools/mock/echo:invoke", json=body), 200)
    elapsed_ms = (time.perf_counter() - started) * 1000
    result = data["response"]["result"]
    say(f"\n2. Query mock/echo -> {result['status']}: {result['outputs']}  ({elapsed_ms:.1f} ms)")


def _start(client: httpx.Client, tool_id: str, arguments: dict[str, Any], caller: str) -> str:
    body = {"arguments": arguments, "caller_id": caller}
    admitted = _data(client.post(f"/tools/{tool_id}:invoke", json=body), 202)
    say(f"   admitted {admitted['invocation_id']} (phase {admitted['phase']})")
    return str(admitted["invocation_id"])


def _events(client: httpx.Client, invocation_id: str) -> Iterator[dict[str, Any]]:
    with client.stream(
        "GET", f"/invocations/{invocation_id}/events", timeout=_STEP_TIMEOUT_S
    ) as sse:
        for line in sse.iter_lines():
            if line.startswith("data: "):
                yield json.loads(line[len("data: ") :])


def _bar(fraction: float, width: int = 30) -> str:
    filled = round(fraction * width)
    return "#" * filled + "." * (width - filled)


def _action_to_completion(client: httpx.Client) -> None:
    say("\n3. Action mock.move for 1.5 s, progress streamed over SSE:")
    invocation_id = _start(
        client, "mock.move", {"duration_s": 1.5, "behaviour": "succeed"}, "demo:move-1"
    )
    for event in _events(client, invocation_id):
        if event["type"] == "progress":
            fraction = float(event["data"].get("fraction", 0.0))
            sys.stdout.write(f"\r   [{_bar(fraction)}] {fraction:5.0%}")
            sys.stdout.flush()
        if event["type"] == "terminal":
            break
    result = _data(client.get(f"/invocations/{invocation_id}/result"), 200)
    say(f"\n   result: {result['result']['status']} {result['result']['outputs']}")
    if result["phase"] != "completed":
        raise DemoFailure(f"the move ended {result['phase']}, expected completed")


def _action_cancelled(client: httpx.Client) -> None:
    say("\n4. Action mock.move for 10 s, cancelled at 30 %:")
    invocation_id = _start(
        client, "mock.move", {"duration_s": 10, "behaviour": "succeed"}, "demo:move-2"
    )
    for event in _events(client, invocation_id):
        fraction = float(event["data"].get("fraction", 0.0)) if event["type"] == "progress" else 0
        if fraction:
            sys.stdout.write(f"\r   [{_bar(fraction)}] {fraction:5.0%}")
            sys.stdout.flush()
        if fraction >= 0.3:
            break
    cancel = client.post(f"/invocations/{invocation_id}/cancel")
    answer = _data(cancel, 202)
    say(
        f"\n   cancel -> HTTP {cancel.status_code}, cancel_status {answer['cancel_status']}, "
        f"phase {answer['phase']} (accepted is not stopped)"
    )
    final = _wait_terminal(client, invocation_id)
    say(f"   final phase: {final['phase']} after {final['progress']['fraction']:.0%} of the motion")
    if final["phase"] != "cancelled":
        raise DemoFailure(f"the cancelled move ended {final['phase']}")


def _session(client: httpx.Client) -> None:
    say("\n5. Session mock.stream: three heartbeats, then stop:")
    invocation_id = _start(client, "mock.stream", {}, "demo:stream")
    beats = 0
    for event in _events(client, invocation_id):
        if event["type"] == "heartbeat":
            beats += 1
            say(f"   heartbeat {event['data']}")
        if beats >= 3:
            break
    stop = client.post(f"/invocations/{invocation_id}/stop")
    answer = _data(stop, 202)
    say(f"   stop -> HTTP {stop.status_code}, stop_status {answer['stop_status']}")
    final = _wait_terminal(client, invocation_id)
    say(f"   final phase: {final['phase']}")
    if final["phase"] != "stopped":
        raise DemoFailure(f"the session ended {final['phase']}")


def _wait_terminal(client: httpx.Client, invocation_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + _STEP_TIMEOUT_S
    while time.monotonic() < deadline:
        status = _data(client.get(f"/invocations/{invocation_id}"), 200)
        if status["terminal"]:
            return status
        time.sleep(0.05)
    raise TimeoutError(f"{invocation_id} did not reach a terminal phase")
