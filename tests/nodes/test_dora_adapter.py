"""The Dora adapter, run against ``dora.testing.MockNode`` (no daemon needed)."""

from __future__ import annotations

import pyarrow as pa
import pytest
from dora.testing import MockNode

from doraforge.nodes.mock import ENDPOINT_ID, definition
from doraforge.nodes.runner import RunnerOptions, run_endpoint
from tests.nodes.provider_harness import decode, request_for, to_value


def _sent_types(node: MockNode, output: str = "tool_response") -> list[str]:
    return [decode(value).message_type for value in node.outputs.get(output, [])]


@pytest.mark.parametrize("use_uvloop", [True, False])
def test_node_registers_answers_and_unregisters_on_stop(use_uvloop: bool) -> None:
    mock = definition()
    echo = request_for(ENDPOINT_ID, str(mock.endpoint_instance_id), "echo", {"message": "hi"})
    node = MockNode(
        [
            ("tool_request", to_value(echo)),
            ("unrelated_input", pa.array([1])),
            ("tool_request", pa.array(["garbage"])),
        ]
    )
    status = run_endpoint(mock, options=RunnerOptions(use_uvloop=use_uvloop), node=node)
    assert status == 0
    assert _sent_types(node) == [
        "endpoint.register",
        "endpoint.status",
        "tool.invoke.response",
        "endpoint.unregister",
    ]
    sent = [decode(value) for value in node.outputs["tool_response"]]
    assert {e.endpoint_instance_id for e in sent} == {mock.endpoint_instance_id}
    assert sent[2].payload["result"]["outputs"] == {"message": "hi"}
    assert all(isinstance(value, pa.StructArray) for value in node.outputs["tool_response"])


def test_closing_the_request_input_stops_the_node() -> None:
    node = MockNode(
        [{"type": "INPUT_CLOSED", "id": "tool_request"}, {"type": "ERROR", "error": "x"}]
    )
    assert run_endpoint(definition(), node=node) == 0
    assert _sent_types(node)[-1] == "endpoint.unregister"


def test_input_and_output_ids_are_configurable() -> None:
    mock = definition()
    echo = request_for(ENDPOINT_ID, str(mock.endpoint_instance_id), "echo", {"message": "x"})
    node = MockNode([("requests", to_value(echo))])
    options = RunnerOptions(request_input="requests", response_output="replies")
    assert run_endpoint(mock, options=options, node=node) == 0
    assert "tool.invoke.response" in _sent_types(node, "replies")
    assert "tool_response" not in node.outputs
