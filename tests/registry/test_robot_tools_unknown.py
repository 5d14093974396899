"""A PAOS outcome that is unknown reaches the agent as unknown, through the registry and MCP.

The spec's result states are ``completed`` and ``failed``: an unknown outcome stays
``failed`` but carries ``remoteState: "unknown"`` and ``retryable: false``, as a write that
timed out in the gates does, and MCP's text tells the agent to reconcile, not retry.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from doraforge.paos.errors import RecordIndeterminate
from doraforge.paos.home import PaosHome
from doraforge.paos.store import StoreUnavailable
from doraforge.registry.mcp_results import tool_result
from doraforge.registry.model import Principal
from doraforge.registry.robot_tools import RobotTools, register_robot_tools
from doraforge.registry.server import build_app, new_service
from doraforge.registry.settings import ServerSettings
from tests.registry.server_support import call_body, running
from tests.support.mcp_errors import error_of

BOTH = frozenset({"robot.read", "robot.write"})
ACCEPT = "application/json, text/event-stream"
START = {"task_id": "t1", "tool_id": "mock.move", "arguments": {}}


def indeterminate() -> RecordIndeterminate:
    return RecordIndeterminate(
        "PAOS_RECORD_INDETERMINATE",
        "the request was sent but its outcome could not be recorded",
        details={"record_id": "rec-1", "caller_id": "paos:t1:1", "invocation_id": "inv-1"},
    )


@dataclass
class StoreFailingTaskService:
    """A TaskService whose store fails: after the POST (unknown) or before it (retryable)."""

    error: Exception
    calls: int = 0
    store: Any = field(default=None)

    async def start_action(
        self, task_id: str, tool_id: str, arguments: dict[str, Any], *, timeout_ms: Any = None
    ) -> dict[str, Any]:
        self.calls += 1
        raise self.error

    async def aclose(self) -> None:
        pass

    def __post_init__(self) -> None:
        self.store = self

    def close(self) -> None:
        pass


def robot(tmp_path: Path, fake: Any) -> RobotTools:
    return RobotTools(PaosHome(tmp_path), lambda: fake)


def approved() -> Principal:
    return Principal(
        id="t", scope="agent", grants=BOTH, approvals=frozenset({"forge.tool_start_action"})
    )


@pytest.mark.anyio
async def test_an_unknown_outcome_is_failed_with_remote_state_unknown_and_never_retryable(
    tmp_path: Path,
) -> None:
    service = new_service(ServerSettings())
    register_robot_tools(service, robot(tmp_path, StoreFailingTaskService(indeterminate())))
    outcome = await service.call(call_body("forge.tool_start_action", START), approved())
    assert outcome["state"] == "failed"
    error = outcome["error"]
    assert (error["code"], error["retryable"]) == ("PAOS_RECORD_INDETERMINATE", False)
    assert error["details"]["remoteState"] == "unknown"
    assert error["details"]["retryable"] is False
    assert error["details"]["invocation_id"] == "inv-1"
    assert error["details"]["record_id"] == "rec-1"


@pytest.mark.anyio
async def test_a_store_failure_before_anything_was_sent_stays_retryable_with_no_remote_state(
    tmp_path: Path,
) -> None:
    unavailable = StoreUnavailable("PAOS_STORE_UNAVAILABLE", "database is locked", retryable=True)
    service = new_service(ServerSettings())
    register_robot_tools(service, robot(tmp_path, StoreFailingTaskService(unavailable)))
    outcome = await service.call(call_body("forge.tool_start_action", START), approved())
    assert outcome["state"] == "failed"
    assert outcome["error"]["retryable"] is True
    assert "remoteState" not in outcome["error"]["details"]


@pytest.mark.anyio
async def test_a_task_service_that_cannot_open_its_store_is_a_tool_failure(
    tmp_path: Path,
) -> None:
    def broken() -> Any:
        raise StoreUnavailable("PAOS_STORE_UNAVAILABLE", "disk I/O error", retryable=True)

    service = new_service(ServerSettings())
    register_robot_tools(service, RobotTools(PaosHome(tmp_path), broken))
    outcome = await service.call(call_body("forge.task_get", {"task_id": "t1"}), approved())
    assert outcome["state"] == "failed"
    assert outcome["error"]["code"] == "PAOS_STORE_UNAVAILABLE"  # not TOOL_ADAPTER_ERROR
    assert outcome["error"]["retryable"] is True


def test_over_mcp_an_unknown_outcome_says_reconcile_and_a_replay_does_not_run_again(
    tmp_path: Path,
) -> None:
    fake = StoreFailingTaskService(indeterminate())
    settings = ServerSettings(grants=BOTH, approvals=frozenset({"*"}), mcp_enabled=True)
    app = build_app(new_service(settings), settings, robot=robot(tmp_path, fake))
    message = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "forge_tool_start_action", "arguments": START},
    }
    headers = {"accept": ACCEPT, "content-type": "application/json", "idempotency-key": "mv-1"}
    with running(app) as url:
        first = httpx.post(f"{url}/mcp", json=message, headers=headers, timeout=10).json()
        again = httpx.post(f"{url}/mcp", json=message, headers=headers, timeout=10).json()
    result = first["result"]
    assert result["isError"] is True
    text = result["content"][0]["text"]
    assert text.startswith("PAOS_RECORD_INDETERMINATE: ")
    assert "outcome unknown" in text
    assert "Do not retry" in text
    assert error_of(result)["details"]["remoteState"] == "unknown"
    assert again["result"]["_meta"]["doraforge/duplicate"] is True
    assert fake.calls == 1  # the replay answered from the retained result


def test_mcp_text_of_a_plain_failure_does_not_claim_an_unknown_outcome() -> None:
    outcome = {
        "requestId": "r-1",
        "state": "failed",
        "error": {"code": "X", "message": "no", "retryable": True, "details": {}},
    }
    result = tool_result(outcome, ServerSettings())
    assert result["content"][0]["text"] == "X: no"


def test_mcp_text_of_a_timed_out_write_says_the_outcome_is_unknown() -> None:
    error = {
        "code": "TOOL_TIMEOUT",
        "message": "forge.tool_start_action did not finish within 30000 ms",
        "retryable": False,
        "details": {"timeoutMs": 30000, "remoteState": "unknown"},
    }
    result = tool_result({"requestId": "r-1", "state": "timeout", "error": error}, ServerSettings())
    assert result["isError"] is True
    assert "outcome unknown" in result["content"][0]["text"]
