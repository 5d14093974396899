"""A provider process dies mid-Action under real ``dora run``.

Dora restarts the node (``restart_policy: on-failure``); the new process registers a new
``endpoint_instance_id`` that replaces the old one. Nothing here may report a motion as
succeeded when its outcome is not known.
"""

from __future__ import annotations

import pytest

from tests.e2e.conftest import MOCK_MARK, MockStack
from tests.support.waiting import eventually

pytestmark = pytest.mark.e2e

RESTART_TIMEOUT_S = 30.0


def _wait_for_new_instance(stack: MockStack, old_instance: str) -> str:
    """Wait until a different provider instance is registered and ready; return its id."""

    def replaced() -> bool:
        if not stack.ready("mock.move"):
            return False
        status = stack.context("mock.move")["endpoint_status"]
        return status is not None and status["endpoint_instance_id"] != old_instance

    eventually(
        replaced, within=RESTART_TIMEOUT_S, what="a new provider instance", detail=stack.context
    )
    instance_id: str = stack.context("mock.move")["endpoint_status"]["endpoint_instance_id"]
    return instance_id


def _assert_new_instance_serves(stack: MockStack, old_instance: str, old_revision: int) -> None:
    new_instance = _wait_for_new_instance(stack, old_instance)
    assert stack.context("mock.move")["registry_revision"] > old_revision
    stats = stack.stats()
    assert stats["endpoint_instance_id"] == new_instance
    assert stats["invokes"]["move"] == 0  # a fresh process, not the one that died
    assert stack.query("echo", {"message": "after restart"})["outputs"] == {
        "message": "after restart"
    }
    admission = stack.start("mock.move", {"duration_s": 0.2, "behaviour": "succeed"})
    final = stack.terminal(admission["invocation_id"])
    assert final["phase"] == "completed"
    assert final["endpoint_instance_id"] == new_instance


def test_provider_crash_mid_action_ends_unknown_and_the_restarted_provider_serves(
    stack: MockStack,
) -> None:
    stack.wait_idle()
    old_instance = stack.stats()["endpoint_instance_id"]
    old_revision = stack.context("mock.move")["registry_revision"]
    old_pid = stack.node(MOCK_MARK).pid
    admission = stack.start("mock.move", {"duration_s": 1.0, "behaviour": "crash"})

    phases: list[str] = []
    final = stack.terminal(admission["invocation_id"], timeout_s=RESTART_TIMEOUT_S, seen=phases)
    assert final["phase"] == "unknown"
    assert final["result"]["status"] == "unknown"
    assert "completed" not in phases

    _assert_new_instance_serves(stack, old_instance, old_revision)
    assert stack.node(MOCK_MARK).pid != old_pid
    assert stack.status(admission["invocation_id"])["phase"] == "unknown"


def test_provider_killed_mid_action_ends_unknown_and_the_restarted_provider_serves(
    stack: MockStack,
) -> None:
    stack.wait_idle()
    old_instance = stack.stats()["endpoint_instance_id"]
    old_revision = stack.context("mock.move")["registry_revision"]
    admission = stack.start("mock.move", {"duration_s": 30.0, "behaviour": "succeed"})
    stack.poll(
        admission["invocation_id"], lambda status: (status["progress"] or {}).get("fraction", 0) > 0
    )

    provider = stack.node(MOCK_MARK)
    provider.kill()
    provider.wait(timeout=10)

    phases: list[str] = []
    final = stack.terminal(admission["invocation_id"], timeout_s=RESTART_TIMEOUT_S, seen=phases)
    assert final["phase"] == "unknown"
    assert final["result"]["status"] == "unknown"
    assert "completed" not in phases

    _assert_new_instance_serves(stack, old_instance, old_revision)
