"""The suite itself, SIGTERMed mid-test, tears its fixtures down (``tests/conftest.py``):
a process a fixture started in a session of its own (as every dataflow, daemon and server
of the e2e tiers is) ends with the run instead of outliving it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import psutil

from tests.paths import PROJECT_ROOT
from tests.support.waiting import eventually

INNER = """
import subprocess
import threading
from pathlib import Path

import pytest

MARK = Path({mark!r})


@pytest.fixture
def child():
    process = subprocess.Popen(["sleep", "600"], start_new_session=True)
    MARK.write_text(str(process.pid))
    yield process
    process.kill()
    process.wait()


def test_waits_for_the_signal(child):
    threading.Event().wait(60)
"""


def test_a_sigterm_to_the_suite_stops_what_its_fixtures_started(tmp_path: Path) -> None:
    mark = tmp_path / "child.pid"
    inner = tmp_path / "test_inner.py"
    inner.write_text(textwrap.dedent(INNER.format(mark=str(mark))), encoding="utf-8")
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    command += ["-p", "tests.conftest", "--rootdir", str(tmp_path), str(inner)]
    run = subprocess.Popen(
        command,
        cwd=PROJECT_ROOT,
        env={**os.environ, "PYTHONPATH": str(PROJECT_ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    child = None
    try:
        eventually(mark.exists, within=60.0, what="the inner fixture to start its child")
        child = psutil.Process(int(mark.read_text()))
        assert child.is_running()
        run.send_signal(signal.SIGTERM)
        output, _ = run.communicate(timeout=60)
        assert b"KeyboardInterrupt" in output, output.decode(errors="replace")
        gone, _ = psutil.wait_procs([child], timeout=10)
        assert gone, f"the fixture's child {child.pid} outlived the SIGTERMed suite"
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
        if child is not None and child.is_running():
            child.kill()
