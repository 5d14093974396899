"""Turn criterion results into a verdict, and a verdict into a task outcome per mode.

=========  ==============================  =========================================
mode       task outcome                    verdict role
=========  ==============================  =========================================
off        execution-derived               not consulted
audit      execution-derived               recorded only
enforce    succeeded only when execution   controls; failure, inconclusive or a
           succeeded AND verdict success   missing verdict fail closed
recovery   as enforce, plus                replan_required -> awaiting_replan
           awaiting_replan
=========  ==============================  =========================================
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from doraforge.paos.verify.contract import Mode
from doraforge.paos.verify.protocol import CriterionResult

VerdictStatus = Literal["success", "failure", "replan_required", "inconclusive"]
TaskOutcome = Literal["succeeded", "failed", "awaiting_replan"]


@dataclass(frozen=True)
class Verdict:
    """The semantic verdict of one revision, with the results it rests on."""

    status: VerdictStatus
    results: tuple[CriterionResult, ...]
    evidence_refs: tuple[str, ...]
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form for the task store."""
        return {
            "status": self.status,
            "detail": self.detail,
            "results": [result.to_dict() for result in self.results],
            "evidence_refs": list(self.evidence_refs),
        }


def decide(
    mode: Mode,
    results: Sequence[CriterionResult],
    *,
    replans_used: int,
    replan_budget: int,
    deadline_passed: bool,
) -> Verdict:
    """Aggregate criterion results.

    No results -> inconclusive (nothing proved success). Any fail -> failure, or in
    ``recovery`` mode replan_required while ``replans_used < replan_budget`` and the
    deadline has not passed. Otherwise any inconclusive -> inconclusive; all pass -> success.
    """
    results = tuple(results)
    refs = tuple(dict.fromkeys(ref for result in results for ref in result.evidence_refs))
    failed = [r.criterion_id for r in results if r.status == "fail"]
    unsure = [r.criterion_id for r in results if r.status != "fail" and r.status != "pass"]
    if not results:
        return Verdict("inconclusive", results, refs, "no criterion was evaluated")
    if failed:
        detail = f"failed: {', '.join(failed)}"
        if mode == "recovery" and replans_used < replan_budget and not deadline_passed:
            left = replan_budget - replans_used
            return Verdict("replan_required", results, refs, f"{detail}; {left} replan(s) left")
        return Verdict("failure", results, refs, detail + _why_no_replan(mode, deadline_passed))
    if unsure:
        return Verdict("inconclusive", results, refs, f"inconclusive: {', '.join(unsure)}")
    return Verdict("success", results, refs, "all criteria passed")


def apply_mode(mode: Mode, execution_ok: bool, verdict: Verdict | None) -> TaskOutcome:
    """The task outcome for ``mode`` (see the module table).

    ``execution_ok`` is the execution-derived fact for the revision being finalized (every
    bound tool record terminal and succeeded). In ``enforce`` and ``recovery`` an execution
    failure fails the task even under a success verdict: the physical outcome is uncertain.
    """
    if mode in ("off", "audit"):
        return "succeeded" if execution_ok else "failed"
    if mode == "recovery" and verdict is not None and verdict.status == "replan_required":
        return "awaiting_replan"
    success = verdict is not None and verdict.status == "success"
    return "succeeded" if execution_ok and success else "failed"


def _why_no_replan(mode: Mode, deadline_passed: bool) -> str:
    if mode != "recovery":
        return ""
    return "; deadline passed" if deadline_passed else "; replan budget spent"
