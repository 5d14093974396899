"""Ctrl-C or SIGTERM landing while a Dora process is being spawned: the process is stopped
again, never left running unowned (``dora run`` and the cluster's services sit in sessions
of their own and would outlive their parent), and the command is interrupted."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from doraforge.skill_runtime import dora_run
from doraforge.skill_runtime.cluster import DoraProcess
from doraforge.skill_runtime.dora_run import Dataflow, exit_on_sigterm, stop_signals_held


@pytest.fixture
def sigterm_raises() -> Iterator[None]:
    """SIGTERM raises KeyboardInterrupt, as every doraforge command sets it up."""
    previous = signal.getsignal(signal.SIGTERM)
    exit_on_sigterm()
    yield
    signal.signal(signal.SIGTERM, previous)


@pytest.fixture
def sigterm_mid_spawn(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[subprocess.Popen[Any]]]:
    """``subprocess.Popen`` that sends this process SIGTERM once the child exists, before
    returning it: the moment a signal could orphan the child. Whatever a failing test
    left running is killed at teardown."""
    spawned: list[subprocess.Popen[Any]] = []
    real_popen = subprocess.Popen

    def popen_then_sigterm(*args: Any, **kwargs: Any) -> subprocess.Popen[Any]:
        child = real_popen(*args, **kwargs)
        spawned.append(child)
        os.kill(os.getpid(), signal.SIGTERM)
        return child

    monkeypatch.setattr(subprocess, "Popen", popen_then_sigterm)
    yield spawned
    for child in spawned:
        if child.poll() is None:
            child.kill()
            child.wait()


def _sleeper(tmp_path: Path) -> Path:
    script = tmp_path / "dora"
    script.write_text("#!/bin/sh\nexec sleep 60\n", encoding="utf-8")
    script.chmod(0o755)
    return script


@pytest.mark.usefixtures("sigterm_raises")
def test_sigterm_while_dora_run_spawns_stops_it_and_interrupts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sigterm_mid_spawn: list[Any]
) -> None:
    monkeypatch.setattr(dora_run, "dora_binary", lambda: str(_sleeper(tmp_path)))
    flow = tmp_path / "flow.yml"
    flow.write_text("nodes: []\n", encoding="utf-8")
    with pytest.raises(KeyboardInterrupt):
        Dataflow(flow, dict(os.environ)).start()
    [child] = sigterm_mid_spawn
    assert child.poll() is not None, "dora run was left running"


@pytest.mark.usefixtures("sigterm_raises")
def test_sigterm_while_a_cluster_service_spawns_stops_it_and_interrupts(
    tmp_path: Path, sigterm_mid_spawn: list[Any]
) -> None:
    with pytest.raises(KeyboardInterrupt):
        DoraProcess.spawn("daemon-robot", ["sleep", "60"], dict(os.environ), tmp_path)
    [child] = sigterm_mid_spawn
    assert child.poll() is not None, "the daemon was left running"


@pytest.mark.usefixtures("sigterm_raises")
def test_handlers_are_restored_after_a_quiet_spawn() -> None:
    before = {signum: signal.getsignal(signum) for signum in dora_run.STOP_SIGNALS}
    with stop_signals_held() as held:
        pass
    assert held == []
    assert {signum: signal.getsignal(signum) for signum in dora_run.STOP_SIGNALS} == before


def test_a_command_that_handles_sigterm_itself_gets_it_once_the_process_is_owned(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sigterm_mid_spawn: list[Any]
) -> None:
    """``doraforge run`` stops its dataflow gracefully from its own handler: a signal held
    during the spawn reaches that handler, with the dataflow still owned and running."""
    monkeypatch.setattr(dora_run, "dora_binary", lambda: str(_sleeper(tmp_path)))
    flow = tmp_path / "flow.yml"
    flow.write_text("nodes: []\n", encoding="utf-8")
    received: list[int] = []
    previous = signal.signal(signal.SIGTERM, lambda signum, _frame: received.append(signum))
    try:
        dataflow = Dataflow(flow, dict(os.environ)).start()
    finally:
        signal.signal(signal.SIGTERM, previous)
    try:
        assert received == [signal.SIGTERM]
        assert dataflow.running()
    finally:
        dataflow.stop()
    assert not dataflow.running()
