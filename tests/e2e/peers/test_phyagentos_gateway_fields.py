"""PhyAgentOS 1.1.1's own ``ForgeToolClient`` against a live doraforge Gateway.

A table pins every field PhyAgentOS reads from each Gateway answer (its client in
``forge/tool_client.py``, its coordinator in ``forge/task.py``, its RuntimeManager in
``skill_runtime/manager.py``): the script runs in PhyAgentOS's own venv
(``tests.peers.phyagentos``) and reports, per answer, the fields and their JSON types.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import pytest
from forge_tool import ToolEnvelope, ToolError, make_invoke_response_envelope

from doraforge.gateway.core import Gateway
from tests.gateway.harness import live_mock_gateway
from tests.gateway.support import assert_error, scripted_stack
from tests.peers import phyagentos
from tests.support.live_server import LiveServer

pytestmark = pytest.mark.e2e

HANG = {"duration_s": 5, "behaviour": "hang"}

#: answer -> {field path: the JSON type PhyAgentOS needs there}
READS: dict[str, dict[str, str]] = {
    "list_tools": {"ok": "bool", "data": "object", "data.gateway_identity": "str"},
    "get_tool": {
        "data.endpoint_id": "str",
        "data.operation": "str",
        "data.semantics": "str",
    },
    "get_tool_context": {"ok": "bool", "data": "object"},
    "invoke_query_tool": {"ok": "bool", "data": "object"},
    "invoke_action": {"data.invocation_id": "str", "data.attempt_id": "str", "data.phase": "str"},
    "invocation_status": {"data.phase": "str"},
    "invocation_result": {"data.status": "str", "data.phase": "str"},
    "cancel_invocation": {"data.phase": "str", "data.status": "str", "data.cancel_status": "str"},
    "start_session": {"data.invocation_id": "str", "data.attempt_id": "str"},
    "stop_session": {"data.phase": "str", "data.status": "str", "data.stop_status": "str"},
    "busy": {"error_code": "str", "status_code": "int", "rejected_before_dispatch": "bool"},
}

SCRIPT = """
import asyncio, json
from PhyAgentOS.forge.tool_client import ForgeToolAPIError, ForgeToolClient
from PhyAgentOS.forge.task import _rejected_before_dispatch, _tool_status

def kind(value):
    return {bool: "bool", int: "int", float: "float", str: "str", dict: "object",
            list: "array", type(None): "null"}[type(value)]

def fields(answer, prefix=""):
    out = {}
    for key, value in answer.items():
        path = prefix + key
        out[path] = kind(value)
        if isinstance(value, dict) and prefix == "":
            out.update(fields(value, path + "."))
    return out

async def main(url):
    seen = {}
    async with ForgeToolClient(url, timeout_s=10) as client:
        seen["list_tools"] = fields(await client.list_tools())
        seen["get_tool"] = fields(await client.get_tool("mock.move"))
        seen["get_tool_context"] = fields(await client.get_tool_context("mock.move"))
        seen["invoke_query_tool"] = fields(
            await client.invoke_query_tool("mock.echo", {"message": "x"}))
        action = await client.invoke_action("mock.move", HANG, caller_id="paos-peer-1")
        seen["invoke_action"] = fields(action)
        invocation_id = action["data"]["invocation_id"]
        try:
            await client.invoke_action("mock.move", HANG, caller_id="paos-peer-2")
        except ForgeToolAPIError as exc:
            seen["busy"] = {
                "error_code": kind(exc.error_code),
                "status_code": kind(exc.status_code),
                "rejected_before_dispatch": kind(_rejected_before_dispatch(exc)),
            }
            seen["busy_values"] = [exc.error_code, _rejected_before_dispatch(exc)]
        seen["invocation_status"] = fields(await client.invocation_status(invocation_id))
        cancel = await client.cancel_invocation(invocation_id)
        seen["cancel_invocation"] = fields(cancel)
        seen["cancel_tool_status"] = _tool_status(cancel, default="unknown")
        for _ in range(200):
            result = await client.invocation_result(invocation_id)
            if result["data"]["status"] == "available":
                break
            await asyncio.sleep(0.05)
        seen["invocation_result"] = fields(result)
        seen["result_tool_status"] = _tool_status(result, default="unknown")
        session = await client.start_session("mock.stream", {})
        seen["start_session"] = fields(session)
        stop = await client.stop_session(session["data"]["invocation_id"])
        seen["stop_session"] = fields(stop)
        seen["stop_tool_status"] = _tool_status(stop, default="unknown")
        seen["gateway_identity"] = (await client.list_tools())["data"]["gateway_identity"]
    print(json.dumps(seen))

asyncio.run(main(URL))
"""


@pytest.fixture
def served() -> Iterator[tuple[Gateway, LiveServer]]:
    with live_mock_gateway() as served:
        yield served


def _run(url: str) -> dict[str, Any]:
    source = f"URL = {url!r}\nHANG = {json.dumps(HANG)}\n{SCRIPT}"
    answer: dict[str, Any] = phyagentos.run(source)
    return answer


def test_every_field_phyagentos_reads_is_there_with_its_type(
    served: tuple[Gateway, LiveServer],
) -> None:
    gateway, server = served
    seen = _run(server.url)
    for answer, reads in READS.items():
        for path, wanted in reads.items():
            assert seen[answer].get(path) == wanted, f"{answer}: {path} is {seen[answer].get(path)}"
    assert seen["busy_values"] == ["FORGE_TOOL_GATEWAY_BUSY", True]
    assert seen["gateway_identity"] == gateway.identity["instance_id"]  # changes on restart
    assert seen["cancel_tool_status"] in ("accepted", "running")
    assert seen["result_tool_status"] == "cancelled"
    assert seen["stop_tool_status"] in ("accepted", "running", "stopped")


def _reject(envelope: ToolEnvelope) -> ToolEnvelope | None:
    error = ToolError(code="MOCK_NOT_HOMED", message="home the arm first")
    return make_invoke_response_envelope(error, envelope)


async def _rejection_payload() -> dict[str, Any]:
    async with scripted_stack(_reject) as stack:
        response = await stack.client.post(
            "/tools/mock.move:invoke", json={"arguments": {"duration_s": 0, "behaviour": "succeed"}}
        )
        assert_error(response, 422, "FORGE_TOOL_ACTION_ADMISSION_REJECTED")
        payload: dict[str, Any] = response.json()
        return payload


def test_a_provider_admission_rejection_reads_as_pre_dispatch_in_phyagentos() -> None:
    payload = asyncio.run(_rejection_payload())
    verdict = phyagentos.run(
        f"""
import json
from PhyAgentOS.forge.tool_client import ForgeToolAPIError
from PhyAgentOS.forge.task import _rejected_before_dispatch
payload = json.loads({json.dumps(json.dumps(payload))})
error = ForgeToolAPIError("rejected", status_code=422, error_code=payload["error"]["code"],
                          payload=payload)
print(json.dumps(_rejected_before_dispatch(error)))
"""
    )
    assert verdict is True
