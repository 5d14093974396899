"""The verification contract: strict parsing with errors that name the field."""

from __future__ import annotations

from typing import Any

import pytest

from doraforge.paos.verify import (
    ExternalCriterion,
    InvalidContract,
    StateCriterion,
    VisionCriterion,
    parse_contract,
)

INSIDE_BOX = {
    "op": "inside_box",
    "value_path": "objects.cube.position",
    "center_path": "target_zone.center",
    "half_extents_path": "target_zone.half_extents",
}


def contract(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "mode": "enforce",
        "goal": "put the red cube in the green zone",
        "success_criteria": [
            {"kind": "state", "id": "cube_in_zone", "tool_id": "world.scene_state",
             "predicate": INSIDE_BOX},
            {"kind": "vision", "id": "seen_in_zone", "source": "scene",
             "object_color": "red", "target_color": "green"},
            {"kind": "external", "id": "judge", "url": "https://judge.example/verify"},
        ],
    }  # fmt: skip
    return base | overrides


def errors_of(data: dict[str, Any]) -> list[str]:
    with pytest.raises(InvalidContract) as caught:
        parse_contract(data)
    assert caught.value.code == "PAOS_INVALID_CONTRACT"
    errors: list[str] = caught.value.details["errors"]
    return errors


def test_a_full_contract_parses_into_typed_criteria_with_defaults() -> None:
    parsed = parse_contract(contract())

    state, vision, external = parsed.success_criteria
    assert isinstance(state, StateCriterion)
    assert state.predicate.op == "inside_box"
    assert state.arguments == {}
    assert isinstance(vision, VisionCriterion)
    assert isinstance(external, ExternalCriterion)
    assert external.timeout_s == 10.0
    assert parsed.replan_budget == 1
    assert parsed.deadline_s is None
    assert parsed.evidence_policy.required_sources == []


def test_comparison_predicates_parse() -> None:
    criteria = [
        {"kind": "state", "id": f"c{i}", "tool_id": "t", "predicate": predicate}
        for i, predicate in enumerate(
            [
                {"op": "equals", "value_path": "a", "value": "x"},
                {"op": "less_than", "value_path": "a", "value": 1},
                {"op": "greater_than", "value_path": "a", "value": 0.5},
                {"op": "is_true", "value_path": "a"},
            ]
        )
    ]
    parsed = parse_contract(contract(success_criteria=criteria, mode="audit"))
    assert all(isinstance(c, StateCriterion) for c in parsed.success_criteria)
    assert [c.predicate.op for c in parsed.success_criteria if isinstance(c, StateCriterion)] == [
        "equals",
        "less_than",
        "greater_than",
        "is_true",
    ]


def test_a_missing_predicate_field_is_named_by_its_path() -> None:
    broken = {"kind": "state", "id": "c", "tool_id": "t", "predicate": {"op": "inside_box"}}
    errors = errors_of(contract(success_criteria=[broken]))
    assert "success_criteria.0.predicate.value_path: Field required" in errors
    assert "success_criteria.0.predicate.center_path: Field required" in errors


@pytest.mark.parametrize(
    ("override", "field"),
    [
        ({"mode": "strict"}, "mode"),
        ({"goal": ""}, "goal"),
        ({"replan_budget": "1"}, "replan_budget"),
        ({"replan_budget": -1}, "replan_budget"),
        ({"deadline_s": 0}, "deadline_s"),
        ({"surprise": True}, "surprise"),
        ({"evidence_policy": {"required_sources": ["scene"], "max_age_s": -1}},
         "evidence_policy.max_age_s"),
        ({"success_criteria": []}, "success_criteria"),
    ],
)  # fmt: skip
def test_invalid_top_level_fields_are_named(override: dict[str, Any], field: str) -> None:
    errors = errors_of(contract(**override))
    assert any(error.startswith(f"{field}: ") for error in errors), errors


@pytest.mark.parametrize(
    ("criterion", "field"),
    [
        ({"kind": "state", "id": "c", "tool_id": "t",
          "predicate": {"op": "less_than", "value_path": "a", "value": "big"}},
         "success_criteria.0.predicate.value"),
        ({"kind": "state", "id": "c", "tool_id": "t",
          "predicate": {"op": "equals", "value_path": "a"}},
         "success_criteria.0.predicate.value"),
        ({"kind": "state", "id": "c", "tool_id": "t",
          "predicate": {"op": "matches", "value_path": "a"}},
         "success_criteria.0.predicate"),
        ({"kind": "vision", "id": "v", "object_color": "red", "target_color": "red"},
         "success_criteria.0.target_color"),
        ({"kind": "vision", "id": "v", "object_color": "purple", "target_color": "red"},
         "success_criteria.0.object_color"),
        ({"kind": "external", "id": "e", "url": "file:///etc/passwd"},
         "success_criteria.0.url"),
        ({"kind": "telepathy", "id": "x"}, "success_criteria.0"),
        ({"kind": "state", "id": "has space", "tool_id": "t",
          "predicate": {"op": "is_true", "value_path": "a"}},
         "success_criteria.0.id"),
    ],
)  # fmt: skip
def test_invalid_criteria_are_named_by_their_path(criterion: dict[str, Any], field: str) -> None:
    errors = errors_of(contract(success_criteria=[criterion]))
    assert any(error.startswith(f"{field}: ") for error in errors), errors


def test_criterion_ids_must_be_unique() -> None:
    criterion = {"kind": "vision", "id": "v", "object_color": "red", "target_color": "green"}
    errors = errors_of(contract(success_criteria=[criterion, criterion]))
    assert errors == ["success_criteria: criterion ids must be unique"]


def test_off_and_audit_may_carry_no_criteria() -> None:
    assert parse_contract(contract(mode="off", success_criteria=[])).success_criteria == []
    assert parse_contract(contract(mode="audit", success_criteria=[])).mode == "audit"
