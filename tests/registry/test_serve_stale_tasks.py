"""``doraforge serve`` as a process ends, as it starts, the agent task a serve that was
killed left open (``owner_stopped``), so the next agent is not refused by it."""

from __future__ import annotations

from pathlib import Path

from doraforge.paos.home import PaosHome
from doraforge.paos.store import AgentTaskStore
from tests.support.live_server import serve_process
from tests.support.waiting import eventually

BINDING = {"skill": "pick-place", "version": "1", "gateway_url": "http://127.0.0.1:9"}


def test_serve_start_ends_the_agent_task_a_killed_serve_left_open(tmp_path: Path) -> None:
    store = AgentTaskStore(PaosHome(tmp_path / "home").store_path)
    try:
        store.put_binding("bind_left", "0" * 64, BINDING)
        store.create_task(
            task_id="task_left",
            revision_id="rev_left",
            binding_id="bind_left",
            goal="left open",
            contract={"mode": "off"},
        )
        store.own_task("task_left", "owner_1_killed")  # its lock went with its process
        with serve_process(tmp_path, "--grant", "robot.read", "--task-idle-timeout", "60"):
            eventually(
                lambda: store.task("task_left").state == "cancelled",
                within=30,
                what="the stale task to be ended",
            )
        outcome = store.task("task_left").outcome
    finally:
        store.close()
    assert outcome is not None
    assert outcome["reason"] == "owner_stopped"
