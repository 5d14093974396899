"""Live servers on real loopback sockets, started and stopped with bounded waits.

- :class:`LiveServer`: an ASGI app under real uvicorn in a background thread, built from the
  product's own ``uvicorn.Config`` (the Gateway's ``server_config``, the registry's
  ``uvicorn_config``) on port 0; the bound port is read back once it listens.
- :func:`serving`: a stdlib ``socketserver`` fake (an upstream, a counting listener, a file
  server) served in a background thread.
- :func:`serve_process`: ``doraforge serve`` as a process, found by the address it prints and
  always stopped (SIGTERM, then SIGKILL).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import socketserver
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx
import psutil
import uvicorn

from tests.paths import PROJECT_ROOT
from tests.support.waiting import eventually

START_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 10.0


class LiveServer:
    """``config``'s app served by uvicorn in a thread while the ``with`` block runs.

    ``on_loop`` is called with the server's event loop before it serves (the Gateway binds
    its observation streams to it). Entering waits (bounded) until uvicorn listens; leaving
    asks it to exit and waits (bounded) until its thread has ended.
    """

    def __init__(
        self,
        config: uvicorn.Config,
        *,
        on_loop: Callable[[asyncio.AbstractEventLoop], None] | None = None,
        within: float = START_TIMEOUT_S,
    ) -> None:
        self._server = uvicorn.Server(config)
        self._on_loop = on_loop
        self._within = within
        self._thread = threading.Thread(target=self._run, name="live-uvicorn", daemon=True)
        self.host = config.host
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def ws_url(self, path: str) -> str:
        """The ``ws://`` URL of ``path`` on this server."""
        return f"ws://{self.host}:{self.port}{path}"

    def client(self, **options: Any) -> httpx.Client:
        """A plain client for this server: no token, no extra headers."""
        return httpx.Client(base_url=self.url, timeout=10.0, **options)

    def _run(self) -> None:
        asyncio.run(self._serve())

    async def _serve(self) -> None:
        if self._on_loop is not None:
            self._on_loop(asyncio.get_running_loop())
        await self._server.serve()

    def __enter__(self) -> LiveServer:
        self._thread.start()
        eventually(
            lambda: self._server.started or not self._thread.is_alive(),
            within=self._within,
            what="uvicorn to listen",
            interval=0.005,
        )
        if not self._server.started:
            raise AssertionError("uvicorn exited before it listened (is the port taken?)")
        self.port = self._server.servers[0].sockets[0].getsockname()[1]
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._server.should_exit = True
        self._thread.join(STOP_TIMEOUT_S)
        if self._thread.is_alive() and exc is None:
            raise AssertionError(f"uvicorn did not stop within {STOP_TIMEOUT_S} s")


@contextlib.contextmanager
def serving[S: socketserver.BaseServer](server: S, *, poll_interval: float = 0.02) -> Iterator[S]:
    """Serve ``server`` in a background thread for the block; always shut it down and close
    it. A short ``poll_interval`` keeps the shutdown quick (the default half second adds up)."""
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": poll_interval}, daemon=True
    )
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(STOP_TIMEOUT_S)


# ------------------------------------------------------------------- doraforge serve

LISTENING = re.compile(r"registry listening on http://(\[[^\]]+\]|[^\s:/]+):(\d+)")
SERVE_START_TIMEOUT_S = 30.0
SERVE_STOP_TIMEOUT_S = 20.0


@dataclass
class ServeProcess:
    """A running ``doraforge serve``: its process, where it listens, its token and logs."""

    process: subprocess.Popen[bytes]
    stdout: Path
    stderr: Path
    port: int = 0
    bound: str = ""
    token: str | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        return self.process.pid

    def bearer(self) -> tuple[tuple[str, str], ...]:
        """The ``Authorization`` header this server wants (none when it has no token)."""
        return () if self.token is None else (("Authorization", f"Bearer {self.token}"),)

    def output(self) -> str:
        return self.stdout.read_text(encoding="utf-8", errors="replace")

    def errors(self) -> str:
        return self.stderr.read_text(encoding="utf-8", errors="replace")


def serve_command(home: Path, *options: str) -> list[str]:
    """``doraforge serve`` on a free port under ``home`` with ``options``."""
    return [
        sys.executable,
        "-m",
        "doraforge.cli",
        "serve",
        "--home",
        str(home),
        "--port",
        "0",
        *options,
    ]


def serve_environment(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    # A wide terminal keeps the one address line on one line.
    return {**os.environ, "COLUMNS": "400", **(extra or {})}


@contextlib.contextmanager
def serve_process(
    directory: Path,
    *options: str,
    token: str | None = None,
    env: Mapping[str, str] | None = None,
) -> Iterator[ServeProcess]:
    """Start ``doraforge serve`` with ``options`` (and ``env`` added to the environment) and
    a home under ``directory``, wait for the address it prints, and always stop it."""
    directory.mkdir(parents=True, exist_ok=True)
    stdout, stderr = directory / "serve.out", directory / "serve.err"
    with stdout.open("wb") as out, stderr.open("wb") as err:
        process = subprocess.Popen(
            serve_command(directory / "home", *options),
            cwd=PROJECT_ROOT,
            env=serve_environment(env),
            stdout=out,
            stderr=err,
        )
    running = ServeProcess(process, stdout, stderr, token=token)
    try:
        found = _await_address(running)
        running.bound, running.port = found.group(1).strip("[]"), int(found.group(2))
        yield running
    finally:
        stop(process)


def _await_address(running: ServeProcess) -> re.Match[str]:
    def address() -> re.Match[str] | bool:
        return LISTENING.search(running.output()) or running.process.poll() is not None

    eventually(
        address,
        within=SERVE_START_TIMEOUT_S,
        what="doraforge serve to print its address",
        detail=running.errors,
    )
    found = LISTENING.search(running.output())
    assert found, (
        f"doraforge serve printed no address (exit {running.process.poll()}):\n"
        f"{running.output()}\n{running.errors()}"
    )
    return found


def stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM, then SIGKILL after :data:`SERVE_STOP_TIMEOUT_S`; never leaves the process."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=SERVE_STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=SERVE_STOP_TIMEOUT_S)


def stop_run(process: subprocess.Popen[bytes], timeout_s: float) -> int:
    """SIGINT (``doraforge run`` forwards it to Dora) and a bounded wait for the exit code;
    then SIGKILL to the process and every descendant it had, so none outlives the test."""
    children = psutil.Process(process.pid).children(recursive=True)
    process.send_signal(signal.SIGINT)
    try:
        return process.wait(timeout=timeout_s)
    finally:
        process.kill()  # a no-op once it has exited
        for child in children:
            with contextlib.suppress(psutil.NoSuchProcess):
                child.kill()
        psutil.wait_procs(children, timeout=timeout_s)
