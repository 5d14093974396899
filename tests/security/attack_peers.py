"""The processes and sockets an attack row runs against or counts on: a ``doraforge serve``
process on a free port (stopped whatever happens) and a loopback listener that counts every
connection made to it, which is how a row proves that nothing was dialled.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from doraforge.skill_runtime.dora_run import wait_until
from tests.paths import PROJECT_ROOT
from tests.security.attack_support import Headers

# ------------------------------------------------------------------------- listener


@dataclass(frozen=True)
class Reply:
    """What the listener answers on one path."""

    status: int = 200
    body: bytes = b'{"ok":true}'
    headers: Mapping[str, str] = field(default_factory=dict)


class _CountingServer(ThreadingHTTPServer):
    """An HTTP server that counts accepted connections and records request targets."""

    daemon_threads = True

    def __init__(self, host: str, replies: Mapping[str, Reply]) -> None:
        super().__init__((host, 0), _ReplyHandler)
        self.replies = dict(replies)
        self.lock = threading.Lock()
        self.connections = 0
        self.targets: list[str] = []

    def get_request(self) -> tuple[socket.socket, Any]:
        request = super().get_request()
        with self.lock:
            self.connections += 1
        return request


class _ReplyHandler(BaseHTTPRequestHandler):
    server: _CountingServer

    def _answer(self) -> None:
        with self.server.lock:
            self.server.targets.append(self.path)  # the raw request target, query and all
        reply = self.server.replies.get(self.path, Reply())
        self.send_response(reply.status)
        for name, value in {"Content-Type": "application/json", **reply.headers}.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(reply.body)))
        self.end_headers()
        self.wfile.write(reply.body)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _answer

    def log_message(self, *_args: Any) -> None:
        return  # a listener hit is counted, not logged


class Listener:
    """A loopback HTTP server on a free port that counts every connection made to it and
    records every raw request target, answering each as ``replies`` says (default 200 JSON).

    The counts are how a row proves that nothing was dialled.
    """

    def __init__(
        self, replies: Mapping[str, Reply] | None = None, *, host: str = "127.0.0.1"
    ) -> None:
        self._server = _CountingServer(host, replies or {})
        # A short poll keeps shutdown() quick; the default half second adds up per row.
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://{self._server.server_address[0]!s}:{self.port}"

    @property
    def connections(self) -> int:
        with self._server.lock:
            return self._server.connections

    def hits(self, target: str) -> int:
        with self._server.lock:
            return self._server.targets.count(target)

    def requests(self) -> list[str]:
        """Every request target received so far, in order."""
        with self._server.lock:
            return list(self._server.targets)

    def __enter__(self) -> Listener:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)


# ------------------------------------------------------------------- doraforge serve

LISTENING = re.compile(r"registry listening on http://(\[[^\]]+\]|[^\s:/]+):(\d+)")
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 20.0


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

    def bearer(self) -> Headers:
        """The ``Authorization`` header this server wants (none when it has no token)."""
        return () if self.token is None else (("Authorization", f"Bearer {self.token}"),)

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
    directory: Path, *options: str, token: str | None = None
) -> Iterator[ServeProcess]:
    """Start ``doraforge serve`` with ``options`` and a home under ``directory``, wait for
    the address it prints, and always stop it (SIGTERM, then SIGKILL)."""
    directory.mkdir(parents=True, exist_ok=True)
    stdout, stderr = directory / "serve.out", directory / "serve.err"
    with stdout.open("wb") as out, stderr.open("wb") as err:
        process = subprocess.Popen(
            serve_command(directory / "home", *options),
            cwd=PROJECT_ROOT,
            env=serve_environment(),
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
    found: list[re.Match[str]] = []

    def listening() -> bool:
        match = LISTENING.search(running.stdout.read_text(encoding="utf-8", errors="replace"))
        if match:
            found.append(match)
        return bool(match) or running.process.poll() is not None

    wait_until(listening, START_TIMEOUT_S, interval_s=0.05)
    assert found, (
        f"doraforge serve printed no address (exit {running.process.poll()}):\n"
        f"{running.stdout.read_text()}\n{running.errors()}"
    )
    return found[0]


def stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM, then SIGKILL after :data:`STOP_TIMEOUT_S`; never leaves the process."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=STOP_TIMEOUT_S)
