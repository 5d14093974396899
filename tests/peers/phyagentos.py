"""A real PhyAgentOS 1.1.1 beside doraforge, for the tests that use it as a peer.

PhyAgentOS pins dependencies doraforge does not share (``websockets<17``, litellm, …), so
it gets its own virtual environment, built once from the package index by the project's
own files (this module) under ``.peers/`` in the checkout and reused while its stamp says
the same version. Tests run PhyAgentOS code in that interpreter as a subprocess: once,
printing one JSON answer (:func:`run`), or as a long-lived peer answering one JSON line
per request (:class:`Session`), for a test that drives PhyAgentOS step by step.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import textwrap
import time
from pathlib import Path
from typing import Any

from tests.peers.venvs import peer_venv

VERSION = "1.1.1"
REQUIREMENT = f"phyagentos-ai=={VERSION}"
INSTALL_TIMEOUT_S = 900.0


def python() -> Path:
    """The interpreter of a PhyAgentOS environment, built on first use (bounded)."""
    venv = peer_venv(f"phyagentos-{VERSION}", REQUIREMENT, timeout_s=INSTALL_TIMEOUT_S)
    return venv / "bin" / "python"


def run(script: str, *, cwd: Path | None = None, timeout: float = 300.0, **env: str) -> Any:
    """Run ``script`` (Python source) in the PhyAgentOS interpreter; it must print one JSON
    document as its last line, which is returned. A non-zero exit fails with its output."""
    done = subprocess.run(
        [str(python()), "-c", textwrap.dedent(script)],
        cwd=cwd,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if done.returncode != 0:
        raise AssertionError(
            f"PhyAgentOS script exited {done.returncode}:\n{done.stdout[-3000:]}\n"
            f"{done.stderr[-3000:]}"
        )
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    return json.loads(lines[-1])


#: Marks the lines a :class:`Session` peer answers with; anything else it prints is noise.
REPLY_PREFIX = "@@doraforge-peer "

#: Defines ``reply(value)`` in a :class:`Session` script: one answer line on stdout.
REPLY_HELPER = f"""
import json as _json, sys as _sys
def reply(value):
    _sys.stdout.write({REPLY_PREFIX!r} + _json.dumps(value) + "\\n")
    _sys.stdout.flush()
"""


class Session:
    """A long-lived PhyAgentOS process that answers one JSON line per request.

    ``script`` (Python source, run in the PhyAgentOS interpreter after
    :data:`REPLY_HELPER`) first answers once when it is ready, then reads one JSON request
    per line from stdin and answers each with ``reply(value)``; it must exit at end of
    input. Whatever else PhyAgentOS prints on stdout is ignored; stderr goes to ``log``.
    Every read is bounded: a peer that exits or stays silent fails the test with the tail
    of its log. Use it as a context manager, which always ends the process.
    """

    def __init__(self, script: str, *, log: Path, cwd: Path | None = None, **env: str) -> None:
        self.log = log
        self._buffer = b""
        with log.open("wb") as sink:  # the child keeps its own descriptor
            self._process = subprocess.Popen(
                [str(python()), "-c", REPLY_HELPER + textwrap.dedent(script)],
                cwd=cwd,
                env={**os.environ, **env},
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=sink,
            )

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def ready(self, timeout: float = 120.0) -> Any:
        """The peer's first answer (what its setup reports)."""
        return self._answer(timeout)

    def request(self, message: Any, timeout: float = 60.0) -> Any:
        """Send ``message`` as one JSON line and return the peer's answer to it."""
        stdin = self._process.stdin
        assert stdin is not None
        try:
            stdin.write(json.dumps(message).encode() + b"\n")
            stdin.flush()
        except BrokenPipeError:
            code = self._process.wait(timeout=10)
            raise AssertionError(f"PhyAgentOS peer exited {code}:\n{self.tail()}") from None
        return self._answer(timeout)

    def close(self, grace_s: float = 30.0) -> None:
        """End of input, then wait for the peer to exit (killed after ``grace_s``)."""
        if self._process.stdin is not None and not self._process.stdin.closed:
            self._process.stdin.close()
        try:
            self._process.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait(timeout=10)
        if self._process.stdout is not None:
            self._process.stdout.close()

    def tail(self, chars: int = 3000) -> str:
        """The end of the peer's stderr log."""
        return self.log.read_text(encoding="utf-8", errors="replace")[-chars:]

    def _answer(self, timeout: float) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            line, newline, rest = self._buffer.partition(b"\n")
            if newline:
                self._buffer = rest
                text = line.decode("utf-8", errors="replace")
                if text.startswith(REPLY_PREFIX):
                    return json.loads(text[len(REPLY_PREFIX) :])
                continue
            self._buffer += self._read(deadline)

    def _read(self, deadline: float) -> bytes:
        stdout = self._process.stdout
        assert stdout is not None
        remaining = deadline - time.monotonic()
        readable, _, _ = select.select([stdout], [], [], max(0.0, remaining))
        if not readable:
            raise AssertionError(f"PhyAgentOS peer silent past its deadline:\n{self.tail()}")
        chunk = os.read(stdout.fileno(), 65536)
        if not chunk:
            code = self._process.wait(timeout=10)
            raise AssertionError(f"PhyAgentOS peer exited {code}:\n{self.tail()}")
        return chunk
