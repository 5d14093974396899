"""The operator's CLI against real Dora: ``run`` on a chosen port stops within 5 s of Ctrl-C
or SIGTERM with nothing left behind, ``tools call`` turns Ctrl-C into a cancel or stop
request and exits with the terminal phase, and ``skill start`` moves its Gateway with
``--port`` and cleans up when interrupted."""

from __future__ import annotations

import contextlib
import json
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import psutil
import pytest

from doraforge.paos.home import PaosHome
from doraforge.skill_runtime.dora_run import dora_environment, free_port
from doraforge.skill_runtime.runtime_state import read_state
from tests.e2e.conftest import MockStack
from tests.paths import PROJECT_ROOT
from tests.skill_runtime.runtime_support import (
    SKILL,
    assert_nothing_runs,
    make_bundle,
    torn_down_home,
)
from tests.support.processes import descendants, survivors
from tests.support.waiting import eventually

pytestmark = pytest.mark.e2e

STOP_WITHIN_S = 5.0
CALL_EXIT_TIMEOUT_S = 30.0
START_TIMEOUT_S = 120.0


class Cli:
    """One ``doraforge`` subprocess with its combined output in a file."""

    def __init__(self, directory: Path, argv: list[str], env: dict[str, str]) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.log = directory / f"cli-{time.monotonic_ns()}.log"
        with self.log.open("wb") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "doraforge.cli", *argv],
                cwd=PROJECT_ROOT,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )

    def output(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")

    def says(self, text: str, within: float) -> None:
        eventually(
            lambda: text in self.output() or self.process.poll() is not None,
            within=within,
            what=f"the CLI to print {text!r}",
            detail=self.output,
        )
        assert text in self.output(), self.output()

    def exits_within(self, seconds: float) -> tuple[int, float]:
        """The exit status and how long after now it came."""
        began = time.monotonic()
        code = self.process.wait(timeout=seconds)
        return code, time.monotonic() - began

    def close(self) -> None:
        with contextlib.suppress(psutil.NoSuchProcess):
            below = descendants(self.process.pid)
            self.process.kill()
            for child in below:
                with contextlib.suppress(psutil.NoSuchProcess):
                    child.kill()
        self.process.wait(timeout=10)


def environment(tmp_path: Path, **extra: str) -> dict[str, str]:
    """A clean environment: its own HOME and state directory, a wide terminal."""
    base = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "TMPDIR": str(tmp_path),
        "COLUMNS": "400",
    }
    return dora_environment(base, **extra)


@contextlib.contextmanager
def cli(tmp_path: Path, *argv: str, env: dict[str, str] | None = None) -> Iterator[Cli]:
    running = Cli(tmp_path / "cli", list(argv), env or environment(tmp_path))
    try:
        yield running
    finally:
        running.close()


def _ready(base: str, tool: str) -> bool:
    try:
        answer = httpx.get(f"{base}/tools/{tool}/context", timeout=2)
    except httpx.HTTPError:
        return False
    return answer.status_code == 200 and bool(answer.json()["data"]["ready"])


# ---------------------------------------------------------------------- doraforge run


@pytest.mark.parametrize(
    ("dataflow", "ready_tool", "signum"),
    [
        ("mock", "mock.move", signal.SIGINT),
        ("mock", "mock.move", signal.SIGTERM),
        pytest.param("sim", "arm.move_to_pose", signal.SIGTERM, marks=pytest.mark.slow),
    ],
)
def test_run_on_a_chosen_port_stops_within_5_s_with_no_traceback_and_no_process_left(
    tmp_path: Path, dataflow: str, ready_tool: str, signum: signal.Signals
) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with cli(tmp_path, "run", dataflow, "--port", str(port)) as run:
        eventually(
            lambda: _ready(base, ready_tool) or run.process.poll() is not None,
            within=START_TIMEOUT_S,
            what=f"{dataflow}'s {ready_tool} to be ready on port {port}",
            detail=run.output,
        )
        assert _ready(base, ready_tool), run.output()
        below = descendants(run.process.pid)
        assert len(below) >= 3, below  # dora run and its nodes
        run.process.send_signal(signum)
        code, took = run.exits_within(STOP_WITHIN_S + 10)
        text = run.output()
    assert took < STOP_WITHIN_S, f"stopped after {took:.1f} s\n{text[-3000:]}"
    # 1 only when a node still ran at the grace deadline and was killed, which it says.
    assert code in (0, 1), text[-3000:]
    if code == 1:
        assert text.strip().splitlines()[-1].startswith("doraforge: RUN_KILLED: ")
    assert "Traceback" not in text
    assert f"stopping the dataflow ({signum.name}" in text
    assert survivors(below, 2) == []


def test_run_keeps_the_gateway_journal_in_its_own_run_directory(tmp_path: Path) -> None:
    port = free_port()
    # --verbose: the Gateway's own log line (naming its journal) reaches the terminal.
    with cli(tmp_path, "run", "mock", "--port", str(port), "--verbose") as run:
        eventually(
            lambda: "starting HTTP on" in run.output() or run.process.poll() is not None,
            within=START_TIMEOUT_S,
            what="the Gateway to start",
            detail=run.output,
        )
        run.process.send_signal(signal.SIGINT)
        run.exits_within(STOP_WITHIN_S + 10)
    found = re.search(rf"starting HTTP on http://127.0.0.1:{port} \(journal (\S+),", run.output())
    assert found, run.output()
    journal = Path(found.group(1))
    runs = tmp_path / "state" / "doraforge" / "runs"
    assert journal.parent.parent == runs
    assert journal.parent.name.startswith("mock-")
    assert journal.name == "gateway.journal"


# ---------------------------------------------------------------------- tools call


def _call(tmp_path: Path, stack: MockStack, tool: str, arguments: dict[str, object]) -> Cli:
    argv = ["--home", str(tmp_path / "home"), "tools", "call", tool]
    argv += ["--gateway", stack.base_url, "--args", json.dumps(arguments)]
    return Cli(tmp_path / "cli", argv, environment(tmp_path))


def test_tools_call_answers_a_query_and_exits_0(tmp_path: Path, stack: MockStack) -> None:
    argv = ["--json", "--home", str(tmp_path / "home"), "tools", "call", "mock.echo"]
    argv += ["--gateway", stack.base_url, "--args", '{"message": "hello"}']
    done = subprocess.run(
        [sys.executable, "-m", "doraforge.cli", *argv],
        cwd=PROJECT_ROOT,
        env=environment(tmp_path),
        capture_output=True,
        text=True,
        timeout=CALL_EXIT_TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["response"]["result"]["outputs"] == {"message": "hello"}


@pytest.mark.parametrize(
    ("behaviour", "phase", "code"), [("succeed", "completed", 0), ("fail", "failed", 1)]
)
def test_tools_call_runs_an_action_to_its_end_and_exits_with_its_phase(
    tmp_path: Path, stack: MockStack, behaviour: str, phase: str, code: int
) -> None:
    call = _call(tmp_path, stack, "mock.move", {"duration_s": 0.5, "behaviour": behaviour})
    try:
        status, _ = call.exits_within(CALL_EXIT_TIMEOUT_S)
    finally:
        call.close()
    assert status == code, call.output()
    assert f"phase {phase}" in call.output()
    assert "(terminal)" in call.output()
    stack.wait_idle()


def _signalled_once_admitted(
    tmp_path: Path, stack: MockStack, tool: str, arguments: dict[str, object], signum: int
) -> tuple[int, str]:
    """``tools call TOOL``, sent ``signum`` once admitted: its exit status and output."""
    call = _call(tmp_path, stack, tool, arguments)
    try:
        call.says("admitted", within=CALL_EXIT_TIMEOUT_S)
        call.process.send_signal(signum)
        status, _ = call.exits_within(CALL_EXIT_TIMEOUT_S)
    finally:
        call.close()
    return status, call.output()


def test_ctrl_c_on_tools_call_requests_a_cancel_and_reports_the_cancelled_phase(
    tmp_path: Path, stack: MockStack
) -> None:
    status, text = _signalled_once_admitted(
        tmp_path, stack, "mock.move", {"duration_s": 30, "behaviour": "succeed"}, signal.SIGINT
    )
    assert status == 3, text
    assert "cancel requested" in text
    assert "phase cancelled" in text
    assert text.index("cancel requested") < text.index("phase cancelled")
    assert "Traceback" not in text
    stack.wait_idle()


def test_sigterm_on_tools_call_for_a_session_requests_a_stop_and_exits_0(
    tmp_path: Path, stack: MockStack
) -> None:
    status, text = _signalled_once_admitted(tmp_path, stack, "mock.stream", {}, signal.SIGTERM)
    assert status == 0, text
    assert "stop requested" in text
    assert "phase stopped" in text
    assert "Traceback" not in text


# ---------------------------------------------------------------------- skill start


@pytest.fixture
def home(tmp_path: Path) -> Iterator[PaosHome]:
    with torn_down_home(tmp_path) as home:
        yield home


def test_skill_start_port_moves_the_gateway_and_tools_call_dials_it(
    tmp_path: Path, home: PaosHome
) -> None:
    make_bundle(home, gateway_port=free_port())
    port = free_port()
    env = environment(tmp_path)
    prefix = [sys.executable, "-m", "doraforge.cli", "--home", str(home.root)]

    def doraforge(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*prefix, *argv],
            cwd=PROJECT_ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=START_TIMEOUT_S,
            check=False,
        )

    started = doraforge("skill", "start", SKILL, "--port", str(port))
    assert started.returncode == 0, started.stderr
    state = read_state(home.runtime_dir, SKILL)
    assert state is not None
    assert state.gateway_url == f"http://127.0.0.1:{port}"
    called = doraforge("tools", "call", "mock.echo", "--skill", SKILL, "--args", '{"message": "x"}')
    assert called.returncode == 0, called.stderr
    stopped = doraforge("skill", "stop", SKILL)
    assert stopped.returncode == 0, stopped.stderr
    # A stopped skill starts again in the same home (the sim skill's operator session
    # checks the stopped skill's refusal, then ends without paying for a second start).
    again = doraforge("skill", "start", SKILL, "--port", str(free_port()))
    assert again.returncode == 0, again.stderr
    assert doraforge("skill", "stop", SKILL).returncode == 0


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupted_skill_start_stops_what_it_started_and_says_so_in_one_line(
    tmp_path: Path, home: PaosHome, signum: signal.Signals
) -> None:
    # A required tool that never becomes ready holds the start in its readiness wait, so
    # the signal lands mid-start however fast (or slow) the machine brings the skill up.
    make_bundle(
        home,
        gateway_port=free_port(),
        required_tools=["mock.echo", "mock.not_in_the_catalog"],
        profile={"startup_timeout_s": 300},
    )
    argv = ["--home", str(home.root), "skill", "start", SKILL]
    with cli(tmp_path, *argv) as start:

        def dora_started() -> bool:
            state = read_state(home.runtime_dir, SKILL)
            return state is not None and state.dataflow_uuid is not None

        eventually(dora_started, within=START_TIMEOUT_S, what="dora start", detail=start.output)
        start.process.send_signal(signum)
        code, _ = start.exits_within(CALL_EXIT_TIMEOUT_S)
    text = start.output()
    assert code == 130, text
    assert text.strip().splitlines()[-1] == ("doraforge: INTERRUPTED: stopped by Ctrl-C or SIGTERM")
    assert "Traceback" not in text
    state = read_state(home.runtime_dir, SKILL)
    assert state is not None
    assert state.state == "failed"
    assert state.error is not None
    assert state.error.code == "SKILL_START_INTERRUPTED"
    assert_nothing_runs(home, state.dataflow_uuid)
