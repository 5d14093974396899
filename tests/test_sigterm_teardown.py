"""The suite itself, SIGTERMed mid-test, leaves nothing behind (``tests/conftest.py``): a
process a fixture started in a session of its own (as every dataflow, daemon and server of
the e2e tiers is) is gone at once, serially and under xdist, even where the fixture's own
teardown would take longer than xdist lets a stopping worker run."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import psutil
import pytest

from tests.paths import PROJECT_ROOT
from tests.support.waiting import eventually

#: A fixture whose child outlives the run unless the run stops it, with a teardown slower
#: than xdist's grace for a stopping worker (about 5 s, then SIGINT, then exit).
INNER = """
import subprocess
import threading
from pathlib import Path

import pytest

MARK = Path({mark!r})


@pytest.fixture
def child():
    process = subprocess.Popen(["sleep", "600"], start_new_session=True)
    yield process
    threading.Event().wait(20)  # a slow teardown, as a cell's orderly stop can be
    process.kill()
    process.wait()


def test_waits_for_the_signal(child):
    ready = MARK.with_suffix(".tmp")
    ready.write_text(str(child.pid))
    ready.rename(MARK)  # whole, and only once the fixture has yielded
    threading.Event().wait(60)
"""


@pytest.mark.parametrize("workers", [[], ["-n", "1"]], ids=["serial", "xdist"])
def test_a_sigterm_to_the_suite_stops_what_its_fixtures_started(
    tmp_path: Path, workers: list[str]
) -> None:
    mark = tmp_path / "child.pid"
    inner = tmp_path / "test_inner.py"
    inner.write_text(textwrap.dedent(INNER.format(mark=str(mark))), encoding="utf-8")
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *workers]
    command += ["-p", "tests.conftest", "--rootdir", str(tmp_path), str(inner)]
    run = subprocess.Popen(
        command,
        cwd=PROJECT_ROOT,
        env={**os.environ, "PYTHONPATH": str(PROJECT_ROOT)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        eventually(mark.exists, within=60.0, what="the inner test to start with its child")
        child = psutil.Process(int(mark.read_text()))
        assert child.is_running()
        run.send_signal(signal.SIGTERM)
        eventually(
            lambda: _ended(child),
            within=10.0,
            what=f"the fixture's child {child.pid} to end with the SIGTERMed suite",
        )
    finally:  # the inner run's own slow teardown is not what is tested: end it
        if run.poll() is None:
            run.kill()
            run.wait()
        if mark.exists():  # never leave the inner child behind, whatever failed
            with contextlib.suppress(psutil.Error, ValueError):
                psutil.Process(int(mark.read_text())).kill()


def _ended(process: psutil.Process) -> bool:
    """Dead: gone, or a zombie its parent (the inner run, still tearing down) will reap."""
    try:
        return process.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True
