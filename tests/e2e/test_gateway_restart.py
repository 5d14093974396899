"""The Gateway node dies mid-Action under real ``dora run`` and Dora restarts it.

The journal is what lets the restarted Gateway answer for an invocation it was carrying:
terminal ``unknown``, never 404. This test kills state, so it runs on a dataflow of its own.
"""

from __future__ import annotations

import httpx
import pytest

from tests.e2e.conftest import GATEWAY_MARK, MockStack
from tests.support.waiting import eventually

pytestmark = pytest.mark.e2e

RESTART_TIMEOUT_S = 30.0


def test_gateway_restart_reads_the_in_flight_invocation_as_unknown_from_the_journal(
    fresh_stack: MockStack,
) -> None:
    stack = fresh_stack
    identity = stack.data(stack.http.get("/tools"))["instance_id"]
    admission = stack.start(
        "mock.move", {"duration_s": 3.0, "behaviour": "succeed"}, caller_id="gw-restart-1"
    )
    invocation_id = admission["invocation_id"]
    stack.poll(invocation_id, lambda status: status["phase"] == "running")

    gateway = stack.node(GATEWAY_MARK)
    gateway.kill()
    gateway.wait(timeout=10)

    def answering_again() -> bool:
        try:
            listing = stack.http.get("/tools", timeout=2.0)
        except httpx.TransportError:
            return False
        return listing.status_code == 200 and (listing.json()["data"]["instance_id"] != identity)

    eventually(answering_again, within=RESTART_TIMEOUT_S, what="the Gateway to come back")
    assert stack.node(GATEWAY_MARK).pid != gateway.pid

    status = stack.status(invocation_id)
    assert status["phase"] == "unknown"
    assert status["terminal"] is True
    assert status["caller_id"] == "gw-restart-1"
    assert status["result"]["status"] == "unknown"
    assert status["result"]["error"]["code"] == "FORGE_TOOL_GATEWAY_RESTARTED_OUTCOME_UNKNOWN"
    result = stack.data(stack.http.get(f"/invocations/{invocation_id}/result"))
    assert result["status"] == "available"
    assert result["result"]["status"] == "unknown"
    found = stack.data(stack.http.get("/invocations", params={"caller_id": "gw-restart-1"}))
    assert [inv["invocation_id"] for inv in found["invocations"]] == [invocation_id]

    # The provider never restarted; it re-registers with the new Gateway and serves again.
    eventually(stack.ready, within=RESTART_TIMEOUT_S, what="mock.move ready", detail=stack.context)
    assert stack.query("echo", {"message": "new gateway"})["status"] == "succeeded"
    stack.wait_idle()
    follow_up = stack.start("mock.move", {"duration_s": 0.2, "behaviour": "succeed"})
    assert stack.terminal(follow_up["invocation_id"])["phase"] == "completed"
