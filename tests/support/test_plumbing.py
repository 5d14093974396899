"""The shared plumbing keeps its promises: bounded waits name what they waited for, fake
deadlines expire exactly when the fake clock reaches them, live servers start and stop."""

from __future__ import annotations

import asyncio
import itertools
import subprocess
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import psutil
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from tests.support.clock import FakeClock
from tests.support.live_server import LiveServer, serving
from tests.support.processes import run_bounded
from tests.support.waiting import eventually, eventually_async, settle


def test_eventually_returns_the_first_truthy_value() -> None:
    calls = itertools.count()
    assert eventually(lambda: next(calls) >= 2 and "ready", within=5, what="x", interval=0) == (
        "ready"
    )


def test_eventually_fails_naming_what_it_waited_for_and_the_detail() -> None:
    with pytest.raises(AssertionError, match=r"waited 0\.01 s for the answer; last: 42"):
        eventually(lambda: False, within=0.01, what="the answer", detail=lambda: "last: 42")


@pytest.mark.anyio
async def test_eventually_async_awaits_a_predicate_and_returns_its_value() -> None:
    answers = iter([None, None, {"status": "available"}])

    async def read() -> dict[str, str] | None:
        return next(answers)

    assert await eventually_async(read, what="the result") == {"status": "available"}


@pytest.mark.anyio
async def test_eventually_async_fails_naming_what_it_waited_for() -> None:
    with pytest.raises(AssertionError, match=r"waited 0\.01 s for registration"):
        await eventually_async(lambda: False, within=0.01, what="registration")


@pytest.mark.anyio
async def test_a_predicates_own_timeout_is_not_reported_as_the_wait_running_out() -> None:
    def times_out() -> bool:
        raise TimeoutError("the predicate's HTTP read")

    with pytest.raises(TimeoutError, match="HTTP read"):
        await eventually_async(times_out, what="anything")


def test_the_fake_clock_moves_only_forward_and_its_clocks_together() -> None:
    clock = FakeClock()
    wall = clock.wall_ms()
    clock.advance(0.199)
    clock.advance(0.001)
    assert clock.monotonic() == clock() == clock.now == 1000.2
    assert clock.wall_ms() == wall + 200
    with pytest.raises(ValueError, match="backwards"):
        clock.advance(-1)


@pytest.mark.anyio
async def test_a_fake_deadline_expires_exactly_when_the_clock_reaches_it() -> None:
    clock = FakeClock()
    entered = asyncio.Event()

    async def guarded() -> None:
        async with clock.timeout(0.2):
            entered.set()
            await asyncio.Event().wait()

    task = asyncio.create_task(guarded())
    await asyncio.wait_for(entered.wait(), timeout=5)
    clock.advance(0.199)
    await settle()
    assert not task.done()
    clock.advance(0.001)
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(task, timeout=5)
    assert clock.requested == [0.2]


@pytest.mark.anyio
async def test_a_block_that_ends_before_its_fake_deadline_is_left_alone() -> None:
    clock = FakeClock()
    async with clock.timeout(1.0) as scope:
        pass
    clock.advance(5)
    assert not scope.expired()


async def _hello(_request: object) -> PlainTextResponse:
    return PlainTextResponse("hello")


def test_a_live_server_listens_on_a_free_port_and_stops() -> None:
    app = Starlette(routes=[Route("/", _hello)])
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="off")
    with LiveServer(config) as server, server.client() as client:
        assert server.port > 0
        assert client.get("/").text == "hello"
    with pytest.raises(httpx.ConnectError):
        httpx.get(server.url, timeout=2)


class _Hello(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "5")
        self.end_headers()
        self.wfile.write(b"hello")

    def log_message(self, *_args: object) -> None:
        return


def test_a_stdlib_fake_is_served_for_the_block_and_closed_after() -> None:
    with serving(ThreadingHTTPServer(("127.0.0.1", 0), _Hello)) as server:
        url = f"http://127.0.0.1:{server.server_address[1]}/"
        assert httpx.get(url, timeout=2).text == "hello"
    with pytest.raises(httpx.ConnectError):
        httpx.get(url, timeout=2)


def test_a_bounded_run_returns_its_output_and_status() -> None:
    finished = run_bounded(["sh", "-c", "cat; echo err >&2; exit 3"], stdin="in", timeout=30)
    assert (finished.returncode, finished.stdout, finished.stderr) == (3, "in", "err\n")


def test_a_bounded_run_past_its_time_kills_everything_it_started() -> None:
    # The child starts a grandchild in the background: both are in the run's group.
    script = "sleep 60 & echo $!; wait"
    with pytest.raises(subprocess.TimeoutExpired) as expired:
        run_bounded(["sh", "-c", script], timeout=1.0)
    grandchild = int(str(expired.value.output).strip())
    eventually(
        lambda: (
            not psutil.pid_exists(grandchild)
            or psutil.Process(grandchild).status() == psutil.STATUS_ZOMBIE
        ),
        within=10.0,
        what="the background sleep to be killed with its group",
    )
