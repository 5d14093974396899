"""Verdict aggregation and the mode table, plus the registry that runs the criteria."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from doraforge.paos.verify import (
    CriterionResult,
    DuplicateVerifier,
    Verdict,
    VerificationContext,
    VerifierRegistry,
    apply_mode,
    decide,
    default_registry,
    parse_contract,
    run_criteria,
)

PASS = CriterionResult("a", "pass", evidence_refs=("before-1", "after-2"))
FAIL = CriterionResult("b", "fail", evidence_refs=("after-2",))
UNSURE = CriterionResult("c", "inconclusive")
MODES = ("off", "audit", "enforce", "recovery")


def verdict(mode: Any, *results: CriterionResult, used: int = 0, late: bool = False) -> Verdict:
    return decide(mode, results, replans_used=used, replan_budget=1, deadline_passed=late)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    ("results", "expected"),
    [
        ((PASS,), "success"),
        ((PASS, UNSURE), "inconclusive"),
        ((UNSURE,), "inconclusive"),
        ((), "inconclusive"),
    ],
)
def test_verdicts_without_failures_do_not_depend_on_mode(
    mode: str, results: tuple[CriterionResult, ...], expected: str
) -> None:
    assert verdict(mode, *results).status == expected


@pytest.mark.parametrize("mode", ["off", "audit", "enforce"])
def test_any_failure_is_a_failure_outside_recovery(mode: str) -> None:
    assert verdict(mode, PASS, FAIL).status == "failure"
    assert verdict(mode, UNSURE, FAIL).status == "failure"


@pytest.mark.parametrize(
    ("used", "late", "expected"),
    [
        (0, False, "replan_required"),
        (1, False, "failure"),
        (0, True, "failure"),
    ],
)
def test_recovery_replans_a_failure_only_within_budget_and_deadline(
    used: int, late: bool, expected: str
) -> None:
    assert verdict("recovery", PASS, FAIL, used=used, late=late).status == expected


def test_recovery_does_not_replan_an_inconclusive_verdict() -> None:
    assert verdict("recovery", UNSURE).status == "inconclusive"


def test_a_verdict_cites_every_evidence_ref_once_in_order() -> None:
    result = verdict("enforce", PASS, FAIL)
    assert result.evidence_refs == ("before-1", "after-2")
    assert result.to_dict()["results"][1] == {
        "criterion_id": "b",
        "status": "fail",
        "detail": "",
        "evidence_refs": ["after-2"],
    }


SUCCESS = verdict("enforce", PASS)
FAILURE = verdict("enforce", FAIL)
INCONCLUSIVE = verdict("enforce", UNSURE)
REPLAN = verdict("recovery", FAIL)


@pytest.mark.parametrize(
    ("mode", "execution_ok", "result", "outcome"),
    [
        # off and audit: the execution facts decide, whatever the verdict says.
        ("off", True, None, "succeeded"),
        ("off", False, SUCCESS, "failed"),
        ("audit", True, FAILURE, "succeeded"),
        ("audit", True, INCONCLUSIVE, "succeeded"),
        ("audit", False, SUCCESS, "failed"),
        # enforce: the verdict controls and fails closed.
        ("enforce", True, SUCCESS, "succeeded"),
        ("enforce", True, FAILURE, "failed"),
        ("enforce", True, INCONCLUSIVE, "failed"),
        ("enforce", True, None, "failed"),
        ("enforce", False, SUCCESS, "failed"),
        # recovery: enforce plus awaiting_replan.
        ("recovery", True, SUCCESS, "succeeded"),
        ("recovery", True, REPLAN, "awaiting_replan"),
        ("recovery", False, REPLAN, "awaiting_replan"),
        ("recovery", True, FAILURE, "failed"),
        ("recovery", True, INCONCLUSIVE, "failed"),
        ("recovery", True, None, "failed"),
        ("recovery", False, SUCCESS, "failed"),
    ],
)
def test_mode_table(mode: Any, execution_ok: bool, result: Verdict | None, outcome: str) -> None:
    assert apply_mode(mode, execution_ok, result) == outcome


class Exploding:
    kind = "state"

    async def verify(self, criterion: Any, context: Any) -> CriterionResult:
        raise RuntimeError("bug")


def test_registering_a_kind_twice_is_refused() -> None:
    registry = default_registry()
    assert registry.kinds == ("state", "vision", "external")
    with pytest.raises(DuplicateVerifier):
        registry.register(Exploding())


@pytest.mark.anyio
async def test_a_raising_verifier_or_an_unregistered_kind_yields_inconclusive() -> None:
    contract = parse_contract(
        {
            "mode": "enforce",
            "goal": "g",
            "success_criteria": [
                {"kind": "state", "id": "s", "tool_id": "t",
                 "predicate": {"op": "is_true", "value_path": "x"}},
                {"kind": "vision", "id": "v", "object_color": "red", "target_color": "green"},
            ],
        }
    )  # fmt: skip
    context = VerificationContext(task_id="t", revision_id="r")

    results = await run_criteria(
        contract.success_criteria, context, VerifierRegistry([Exploding()])
    )

    assert [(r.criterion_id, r.status) for r in results] == [
        ("s", "inconclusive"),
        ("v", "inconclusive"),
    ]
    assert "bug" in results[0].detail
    assert apply_mode("enforce", True, verdict("enforce", *results)) == "failed"


@pytest.mark.anyio
async def test_a_real_pick_and_place_is_a_success_with_both_verifiers() -> None:
    data = Path(__file__).parent / "data"
    contract = parse_contract(
        {
            "mode": "enforce",
            "goal": "put the red cube in the green zone",
            "success_criteria": [
                {"kind": "state", "id": "cube_in_zone", "tool_id": "world.scene_state",
                 "predicate": {"op": "inside_box", "value_path": "objects.cube.position",
                               "center_path": "target_zone.center",
                               "half_extents_path": "target_zone.half_extents"}},
                {"kind": "vision", "id": "seen_in_zone", "object_color": "red",
                 "target_color": "green"},
            ],
        }
    )  # fmt: skip
    scene = {
        "objects": {"cube": {"position": [0.348, -0.219, 0.022]}},
        "target_zone": {"center": [0.35, -0.22, 0.0], "half_extents": [0.04, 0.04, 0.03]},
    }

    async def query(tool_id: str, arguments: Any) -> dict[str, Any]:
        return scene

    evidence = [
        {"artifact_id": "b", "source": "scene", "phase": "before", "seq": 1,
         "file": str(data / "pick_place_before.png")},
        {"artifact_id": "a", "source": "scene", "phase": "after", "seq": 2,
         "file": str(data / "pick_place_after.png")},
    ]  # fmt: skip
    context = VerificationContext(task_id="t", revision_id="r", evidence=evidence, query=query)

    results = await run_criteria(contract.success_criteria, context, default_registry())
    result = decide(contract.mode, results, replans_used=0, replan_budget=1, deadline_passed=False)

    assert result.status == "success", result.to_dict()
    assert result.evidence_refs == ("b", "a")
    assert apply_mode(contract.mode, True, result) == "succeeded"
