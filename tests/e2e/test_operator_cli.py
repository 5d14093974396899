"""An operator's session on the real sim skill, through the ``doraforge`` command only.

One installed skill started on Dora (its Gateway on a free port): ``task run`` twice (the
second finds the cube already in the zone and is refused at once, naming ``world.reset``),
the report in its task's own folder with every frame; agents (through ``serve``) and a
second start told the port it was started on; a misspelled tool answered with the closest
and ``tools describe``; a run cancelled from another terminal ends in one line per
outcome, no traceback; ``skill logs`` with ``--node``/``--lines``/``--follow`` and Dora's
diagnostics hidden; ``skill status``; and ``task run`` once the skill is stopped.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from doraforge.paos.home import PaosHome
from doraforge.paos.store import AgentTaskStore
from doraforge.skill_runtime.dora_run import dora_environment, free_port
from tests.paths import PROJECT_ROOT
from tests.registry.server_support import call_body
from tests.support.live_server import serve_process
from tests.support.waiting import eventually

# Two pick-and-places in one test take minutes on a loaded machine.
pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.timeout(900)]

RUN_TIMEOUT_S = 300.0
SKILL = "pick-place"


class Operator:
    """Runs ``doraforge --home HOME …`` as a person at a terminal would."""

    def __init__(self, home: Path, env: dict[str, str]) -> None:
        self.home, self.env = home, env
        # The shipped skill names 9201; this session's Gateway takes a free port.
        self.port = free_port()
        self.started = False  # whether this module's skill runs (``operator`` starts it)

    def argv(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "doraforge.cli", "--home", str(self.home), *args]

    def run(self, *args: str, timeout_s: float = RUN_TIMEOUT_S) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.argv(*args),
            cwd=PROJECT_ROOT,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )

    def start(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            self.argv(*args),
            cwd=PROJECT_ROOT,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )


@pytest.fixture(scope="module")
def person(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Operator]:
    """The module's operator with the skill installed; it is started by ``operator``."""
    root = tmp_path_factory.mktemp("operator")
    # Unbuffered: the tests read a running command's lines as it prints them.
    env = dora_environment({**os.environ, "HOME": str(root), "PYTHONUNBUFFERED": "1"})
    person = Operator(root / "home", env)
    archive = root / f"{SKILL}.tar.gz"
    assert person.run("skill", "pack", SKILL, "--output", str(archive)).returncode == 0
    assert person.run("skill", "install", str(archive), "--yes").returncode == 0
    try:
        yield person
    finally:
        if person.started:
            stopped = person.run("skill", "stop", SKILL, "--force")
            assert stopped.returncode == 0, stopped.stderr


@pytest.fixture
def operator(person: Operator) -> Operator:
    """The operator with the skill running: started once for the module, and again only
    after a row stopped it (the stopped-skill row is last, so it costs no restart)."""
    if not person.started:
        started = person.run(
            "skill", "start", SKILL, "--profile", "sim", "--port", str(person.port)
        )
        assert started.returncode == 0, started.stderr
        person.started = True
    return person


def report_of(stdout: str) -> Path:
    (path,) = re.findall(r"^report: (.+)$", stdout, flags=re.MULTILINE)
    return Path(path)


def test_a_second_run_on_the_solved_scene_is_refused_at_once_naming_world_reset(
    operator: Operator, tmp_path: Path
) -> None:
    first = operator.run("task", "run", SKILL, "--out", str(tmp_path))
    # The first run puts the cube in the zone (on a loaded machine its last step, going
    # home, may still time out: that fails the task but the cube is placed).
    assert " ✓ cube_in_zone " in first.stdout, first.stdout + first.stderr
    tasks_before = operator.run("--json", "task", "list").stdout
    second = operator.run("task", "run", SKILL, "--out", str(tmp_path))

    # Refused before any task is created or anything moves, naming the next command.
    assert (second.returncode, second.stdout) == (1, ""), second.stdout + second.stderr
    assert second.stderr.startswith("doraforge: TASK_GOAL_ALREADY_MET: ")
    assert f"`doraforge tools call world.reset --skill {SKILL}`" in second.stderr
    assert second.stderr.count("\n") == 1
    assert operator.run("--json", "task", "list").stdout == tasks_before
    if " failed: " not in first.stdout:
        first_frames = (report_of(first.stdout).parent / "frames").glob("*.png")
        assert len(list(first_frames)) >= 10  # before, and after each of the nine steps
    report = report_of(first.stdout)
    assert report.parent.parent == tmp_path
    assert report.parent.name.startswith("task_")
    frames = sorted((report.parent / "frames").glob("*.png"))
    assert len(frames) >= 2  # the frame before the task, and one after each step run
    page = report.read_text(encoding="utf-8")
    assert all(f"frames/{frame.name}" in page for frame in frames)


def test_agents_are_told_the_port_the_skill_was_started_on(
    operator: Operator, tmp_path: Path
) -> None:
    # `doraforge serve` on the same home, asked as an agent asks: forge.skills.installed.
    with serve_process(operator.home.parent, "--grant", "robot.read", env=operator.env) as served:
        body = call_body("forge.skills.installed", {})
        answer = httpx.post(f"{served.base_url}/api/tools/call", json=body, timeout=30)
    assert answer.status_code == 200, answer.text
    (skill,) = answer.json()["result"]["skills"]
    # The manifest names 9201; this session started it on a free port.
    assert skill["gateway_url"] == f"http://127.0.0.1:{operator.port}"
    assert skill["manifest_gateway_url"] != skill["gateway_url"]
    assert skill["state"] == "running"


def test_a_second_start_says_where_the_running_skill_listens(operator: Operator) -> None:
    again = operator.run("skill", "start", SKILL, "--profile", "sim")
    assert again.returncode == 1
    assert again.stderr.startswith("doraforge: SKILL_ALREADY_RUNNING: ")
    assert f"Gateway at http://127.0.0.1:{operator.port};" in again.stderr


def test_a_misspelled_tool_offers_the_closest_and_describe_shows_the_schema(
    operator: Operator,
) -> None:
    typo = operator.run("tools", "call", "arm.hom", "--skill", SKILL)
    described = operator.run("--json", "tools", "describe", "arm.move_to_pose", "--skill", SKILL)
    assert typo.returncode == 1
    assert typo.stderr.startswith(
        "doraforge: FORGE_TOOL_NOT_FOUND: no tool 'arm.hom'; did you mean 'arm.home'"
    )
    assert f"`doraforge tools list --skill {SKILL}`" in typo.stderr
    assert described.returncode == 0, described.stderr
    document = json.loads(described.stdout)
    assert document["tool"]["input_schema"]["type"] == "object"
    assert document["example_command"].startswith(
        f"doraforge tools call arm.move_to_pose --skill {SKILL} --args "
    )


def test_a_run_cancelled_from_another_terminal_ends_in_lines_not_a_traceback(
    operator: Operator, tmp_path: Path
) -> None:
    # A fresh scene: an earlier row may have left the cube in the zone (refused at once).
    reset = operator.run("tools", "call", "world.reset", "--skill", SKILL)
    assert reset.returncode == 0, reset.stderr
    # The with statement closes the pipes however the test ends (left open, they surface
    # as ResourceWarnings failing whichever test the collector next runs in).
    with started_run(operator, tmp_path) as running:
        try:
            task_id = task_of(running)
            assert running.stdout is not None
            stdout = running.stdout
            # The first step is under way once the scene has been read and planned.
            eventually(
                lambda: "cube at" in stdout.readline(), within=30, what="the plan", interval=0
            )
            cancelled = operator.run("task", "cancel", task_id)
            out, err = running.communicate(timeout=RUN_TIMEOUT_S)
        finally:
            if running.poll() is None:
                running.kill()
    assert cancelled.returncode == 0, cancelled.stderr
    assert f"task {task_id}: cancelled" in cancelled.stdout
    assert running.returncode == 1
    assert "Traceback" not in out + err
    assert err == ""
    assert "verdict: not verified · task cancelled" in out
    assert "cancelled before verification (operator_requested)" in out
    assert report_of(out).is_file()


def started_run(operator: Operator, out: Path) -> subprocess.Popen[str]:
    return operator.start("task", "run", SKILL, "--out", str(out))


def task_of(running: subprocess.Popen[str]) -> str:
    """The id of the task ``running`` opened (read from its output, bounded)."""
    assert running.stdout is not None
    stdout = running.stdout
    bound = eventually(
        lambda: re.search(r"task (task_[0-9a-f]+) bound to", stdout.readline()),
        within=60,
        what="the task to be created",
        interval=0,
    )
    return bound.group(1)


def until_descending(operator: Operator, running: subprocess.Popen[str], task_id: str) -> str:
    """Wait until the second step, "descend", is an Action the Gateway runs; its record."""
    assert running.stdout is not None
    stdout = running.stdout
    eventually(lambda: "cube at" in stdout.readline(), within=30, what="the plan", interval=0)
    eventually(
        lambda: "move above the cube" in stdout.readline(),
        within=120,
        what="the first step to end",
        interval=0,
    )

    # Read from the store directly: a `task get` process would answer too late to catch
    # a descend of a second or two still running.
    store = AgentTaskStore(PaosHome(operator.home).store_path)
    try:

        def descending() -> str | None:
            # The scene Query, the move above the cube (completed), then the descend.
            records = store.records(task_id)
            live = len(records) >= 3 and records[-1].state in ("accepted", "running")
            return records[-1].record_id if live else None

        record_id: str = eventually(
            descending, within=60, what="the descend to be admitted", interval=0.01
        )
    finally:
        store.close()
    return record_id


def described(operator: Operator, task_id: str) -> dict[str, Any]:
    answer = operator.run("--json", "task", "get", task_id, timeout_s=60)
    assert answer.returncode == 0, answer.stderr
    document: dict[str, Any] = json.loads(answer.stdout)
    return document


def state_of(operator: Operator, task_id: str) -> str:
    state: str = described(operator, task_id)["task"]["state"]
    return state


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_mid_action_cancels_and_finalizes_the_task_and_the_next_run_starts(
    operator: Operator, tmp_path: Path, signum: signal.Signals
) -> None:
    with started_run(operator, tmp_path) as running:
        try:
            task_id = task_of(running)
            record_id = until_descending(operator, running, task_id)
            began = time.monotonic()
            running.send_signal(signum)
            out, err = running.communicate(timeout=60)
            took = time.monotonic() - began
        finally:
            if running.poll() is None:
                running.kill()
    assert running.returncode == 128 + signum, out + err
    assert took < 45  # the bounded cleanup (20 s) and the report, never a hang
    assert "Traceback" not in out + err
    assert f"task {task_id} cancelled (interrupted by {signum.name}); the running " in out
    (descend,) = [r for r in described(operator, task_id)["records"] if r["record_id"] == record_id]
    assert descend["state"] in ("cancelled", "completed", "unknown")  # as the provider said
    if descend["state"] != "completed":  # it had not reached the cube when the signal came
        assert descend["cancel"] is not None  # the Gateway was asked to cancel it
    assert state_of(operator, task_id) == "cancelled"  # not executing: the slot is free
    # The next run is accepted (not PAOS_TASK_ACTIVE); it is interrupted in turn.
    with started_run(operator, tmp_path) as following:
        try:
            next_id = task_of(following)
            following.send_signal(signal.SIGINT)
            out, err = following.communicate(timeout=60)
        finally:
            if following.poll() is None:
                following.kill()
    assert next_id != task_id
    assert following.returncode == 130, out + err
    assert state_of(operator, next_id) == "cancelled"


def test_a_second_ctrl_c_cuts_the_cleanup_short_and_still_ends_the_task(
    operator: Operator, tmp_path: Path
) -> None:
    with started_run(operator, tmp_path) as running:
        try:
            task_id = task_of(running)
            until_descending(operator, running, task_id)
            running.send_signal(signal.SIGINT)
            assert running.stdout is not None
            stdout = running.stdout
            eventually(
                lambda: f"cancelling task {task_id}" in stdout.readline(),
                within=30,
                what="the cleanup to begin",
                interval=0,
            )
            running.send_signal(signal.SIGINT)
            out, err = running.communicate(timeout=60)
        finally:
            if running.poll() is None:
                running.kill()
    assert running.returncode == 130, out + err
    assert "Traceback" not in out + err
    assert state_of(operator, task_id) == "cancelled"


def test_logs_of_one_node_hide_doras_diagnostics_unless_all(operator: Operator) -> None:
    filtered = operator.run("skill", "logs", SKILL, "--node", "gateway", "--lines", "5")
    everything = operator.run("skill", "logs", SKILL, "--node", "gateway", "--lines", "5", "--all")
    assert filtered.returncode == 0, filtered.stderr
    assert everything.returncode == 0, everything.stderr
    assert "node gateway ==" in filtered.stdout
    assert "== runtime log" not in filtered.stdout  # one node asked for, one node shown
    node_lines = [line for line in filtered.stdout.splitlines() if " gateway: " in line]
    assert len(node_lines) <= 5
    assert "dora_node_api::" not in filtered.stdout
    assert "zenoh::" not in filtered.stdout


def test_logs_follow_streams_until_ctrl_c_and_exits_cleanly(operator: Operator) -> None:
    # The with statement closes the pipes however the test ends (left open, they surface
    # as ResourceWarnings failing whichever test the collector next runs in).
    with operator.start("skill", "logs", SKILL, "--follow", "--lines", "3") as follower:
        try:
            assert follower.stdout is not None
            stdout = follower.stdout
            eventually(
                lambda: stdout.readline().startswith("== runtime log"),
                within=30,
                what="the logs before following",
                interval=0,
            )
            assert follower.poll() is None  # still following
            began = time.monotonic()
            follower.send_signal(signal.SIGINT)
            _, err = follower.communicate(timeout=10)
        finally:
            if follower.poll() is None:
                follower.kill()
    assert time.monotonic() - began < 5
    assert follower.returncode == 0
    assert "Traceback" not in err


def test_status_shows_the_running_skill_with_its_gateway(operator: Operator) -> None:
    status = operator.run("--json", "skill", "status", SKILL)
    assert status.returncode == 0, status.stderr
    assert '"state": "running"' in status.stdout


def test_task_run_on_the_stopped_skill_is_one_line_saying_how_to_start_it(
    operator: Operator, tmp_path: Path
) -> None:
    assert operator.run("skill", "stop", SKILL, "--force").returncode == 0
    operator.started = False  # a later row asking for ``operator`` starts it again
    refused = operator.run("task", "run", SKILL, "--out", str(tmp_path))
    assert refused.returncode == 1
    assert refused.stderr == (
        "doraforge: SKILL_NOT_RUNNING: forge_task_create: skill 'pick-place' is stopped; "
        "start it with `doraforge skill start pick-place`\n"
    )
