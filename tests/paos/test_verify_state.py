"""The state verifier: predicates over live Query outputs, inconclusive instead of raising."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from doraforge.paos.verify import StateCriterion, VerificationContext
from doraforge.paos.verify.state import StateVerifier

pytestmark = pytest.mark.anyio

SCENE = {
    "objects": {"cube": {"position": [0.35, -0.22, 0.02], "size": [0.04, 0.04, 0.04]}},
    "target_zone": {"center": [0.34, -0.21, 0.0], "half_extents": [0.05, 0.05, 0.05]},
    "gripper": {"width": 0.08, "holding": False},
    "seed": 3,
    "items": [{"name": "cube"}],
}
INSIDE_BOX = {
    "op": "inside_box",
    "value_path": "objects.cube.position",
    "center_path": "target_zone.center",
    "half_extents_path": "target_zone.half_extents",
}


class FakeQuery:
    """Implements the coordinator's ``query`` callable over canned outputs."""

    def __init__(self, outputs: Any = SCENE, error: Exception | None = None) -> None:
        self.outputs, self.error = outputs, error
        self.calls: list[tuple[str, dict[str, Any]]] = []

    async def __call__(self, tool_id: str, arguments: Mapping[str, Any]) -> Any:
        self.calls.append((tool_id, dict(arguments)))
        if self.error is not None:
            raise self.error
        return self.outputs


def criterion(predicate: dict[str, Any], **extra: Any) -> StateCriterion:
    return StateCriterion.model_validate(
        {"kind": "state", "id": "c", "tool_id": "world.scene_state", "predicate": predicate} | extra
    )


async def verify(predicate: dict[str, Any], outputs: Any = SCENE, **extra: Any) -> Any:
    query = FakeQuery(outputs)
    context = VerificationContext(task_id="t", revision_id="r", query=query)
    return await StateVerifier().verify(criterion(predicate, **extra), context)


async def test_cube_inside_the_target_zone_passes_and_reads_the_named_tool() -> None:
    query = FakeQuery()
    context = VerificationContext(task_id="t", revision_id="r", query=query)
    check = criterion(INSIDE_BOX, arguments={"detail": "full"})

    result = await StateVerifier().verify(check, context)

    assert result.status == "pass"
    assert result.criterion_id == "c"
    assert query.calls == [("world.scene_state", {"detail": "full"})]


async def test_cube_outside_the_target_zone_fails() -> None:
    outside = {**SCENE, "objects": {"cube": {"position": [0.5, -0.22, 0.02]}}}
    assert (await verify(INSIDE_BOX, outside)).status == "fail"


async def test_the_box_boundary_counts_as_inside() -> None:
    edge = {
        "objects": {"cube": {"position": [0.75, -0.25, 0.0]}},
        "target_zone": {"center": [0.25, 0.25, 0.0], "half_extents": [0.5, 0.5, 0.0]},
    }
    assert (await verify(INSIDE_BOX, edge)).status == "pass"


@pytest.mark.parametrize(
    ("predicate", "status"),
    [
        ({"op": "equals", "value_path": "seed", "value": 3}, "pass"),
        ({"op": "equals", "value_path": "seed", "value": 3.0}, "pass"),
        ({"op": "equals", "value_path": "seed", "value": 4}, "fail"),
        ({"op": "equals", "value_path": "items.0.name", "value": "cube"}, "pass"),
        ({"op": "equals", "value_path": "gripper.holding", "value": 0}, "fail"),
        ({"op": "less_than", "value_path": "gripper.width", "value": 0.1}, "pass"),
        ({"op": "less_than", "value_path": "gripper.width", "value": 0.08}, "fail"),
        ({"op": "greater_than", "value_path": "objects.cube.position.2", "value": 0}, "pass"),
        ({"op": "is_true", "value_path": "gripper.holding"}, "fail"),
    ],
)
async def test_comparisons(predicate: dict[str, Any], status: str) -> None:
    assert (await verify(predicate)).status == status


@pytest.mark.parametrize(
    "predicate",
    [
        {**INSIDE_BOX, "value_path": "objects.sphere.position"},
        {**INSIDE_BOX, "center_path": "target_zone.centre"},
        {**INSIDE_BOX, "half_extents_path": "seed"},
        {**INSIDE_BOX, "value_path": "items.5"},
        {"op": "less_than", "value_path": "items.0.name", "value": 1},
        {"op": "greater_than", "value_path": "gripper.holding", "value": 0},
        {"op": "is_true", "value_path": "seed"},
        {"op": "equals", "value_path": "objects.cube.position.x", "value": 1},
    ],
)
async def test_missing_paths_and_wrong_types_are_inconclusive(predicate: dict[str, Any]) -> None:
    result = await verify(predicate)
    assert result.status == "inconclusive"
    assert result.detail


async def test_vectors_of_different_lengths_are_inconclusive() -> None:
    flat = {**SCENE, "target_zone": {"center": [0.3, -0.2], "half_extents": [0.1, 0.1]}}
    assert (await verify(INSIDE_BOX, flat)).status == "inconclusive"


async def test_non_mapping_outputs_are_inconclusive() -> None:
    assert (await verify(INSIDE_BOX, outputs=None)).status == "inconclusive"
    assert (await verify(INSIDE_BOX, outputs=[1, 2, 3])).status == "inconclusive"


async def test_a_failing_query_is_inconclusive_not_an_exception() -> None:
    query = FakeQuery(error=TimeoutError("remote state unknown"))
    context = VerificationContext(task_id="t", revision_id="r", query=query)

    result = await StateVerifier().verify(criterion(INSIDE_BOX), context)

    assert result.status == "inconclusive"
    assert "remote state unknown" in result.detail


async def test_without_a_query_function_the_criterion_is_inconclusive() -> None:
    context = VerificationContext(task_id="t", revision_id="r")
    assert (await StateVerifier().verify(criterion(INSIDE_BOX), context)).status == "inconclusive"
