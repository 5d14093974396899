"""The state verifier: predicates over the outputs of a Query tool read live.

The Query runs through the coordinator's ``context.query``; its failure, a missing path or
a value of the wrong type make the criterion ``inconclusive``, never an exception.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from typing import Any

from doraforge.paos.verify.contract import Compare, Criterion, InsideBox, StateCriterion
from doraforge.paos.verify.paths import MISSING, lookup
from doraforge.paos.verify.protocol import CriterionResult, CriterionStatus, VerificationContext

log = logging.getLogger(__name__)


class Inconclusive(Exception):
    """Internal: the predicate cannot be decided; the message becomes the detail."""


class StateVerifier:
    """Verifier for ``kind: state`` criteria."""

    kind = "state"

    async def verify(self, criterion: Criterion, context: VerificationContext) -> CriterionResult:
        """Read ``criterion.tool_id`` through ``context.query`` and evaluate the predicate."""
        if not isinstance(criterion, StateCriterion):
            return CriterionResult(criterion.id, "inconclusive", "not a state criterion")
        if context.query is None:
            return _result(criterion, "inconclusive", "no query function in the context")
        try:
            outputs = await context.query(criterion.tool_id, dict(criterion.arguments))
        except Exception as exc:  # the coordinator's client errors are all inconclusive here
            log.info("state criterion %s: query failed: %r", criterion.id, exc)
            return _result(criterion, "inconclusive", f"query {criterion.tool_id} failed: {exc}")
        try:
            status, detail = evaluate(criterion.predicate, outputs)
        except Inconclusive as exc:
            return _result(criterion, "inconclusive", str(exc))
        return _result(criterion, status, f"{criterion.tool_id}: {detail}")


def evaluate(
    predicate: InsideBox | Compare, outputs: Mapping[str, Any]
) -> tuple[CriterionStatus, str]:
    """``("pass" | "fail", detail)`` for ``predicate`` over ``outputs``.

    Raises :class:`Inconclusive` when a path is missing or a value has the wrong type.
    """
    if isinstance(predicate, InsideBox):
        return _inside_box(predicate, outputs)
    return _compare(predicate, _get(outputs, predicate.value_path))


def _inside_box(predicate: InsideBox, outputs: Mapping[str, Any]) -> tuple[CriterionStatus, str]:
    value = _vector(outputs, predicate.value_path)
    center = _vector(outputs, predicate.center_path)
    half = _vector(outputs, predicate.half_extents_path)
    if not len(value) == len(center) == len(half):
        raise Inconclusive("inside_box: value, center and half_extents differ in length")
    inside = all(abs(v - c) <= h for v, c, h in zip(value, center, half, strict=True))
    where = "inside" if inside else "outside"
    return ("pass" if inside else "fail"), f"{predicate.value_path} is {where} the box"


def _compare(predicate: Compare, value: Any) -> tuple[CriterionStatus, str]:
    if predicate.op == "is_true":
        if not isinstance(value, bool):
            raise Inconclusive(f"{predicate.value_path} is not a boolean")
        return ("pass" if value else "fail"), f"{predicate.value_path} is {value}"
    if predicate.op == "equals":
        ok = _same(value, predicate.value)
        return ("pass" if ok else "fail"), f"{predicate.value_path} equals: {ok}"
    number = _number(value, predicate.value_path)
    ok = number < predicate.value if predicate.op == "less_than" else number > predicate.value
    return ("pass" if ok else "fail"), f"{predicate.value_path} {predicate.op}: {ok}"


def _same(left: Any, right: Any) -> bool:
    # JSON semantics: true is not 1, and 1 equals 1.0.
    if isinstance(left, bool) or isinstance(right, bool):
        return type(left) is type(right) and left == right
    return bool(left == right)


def _get(outputs: Mapping[str, Any], path: str) -> Any:
    value = lookup(outputs, path)
    if value is MISSING:
        raise Inconclusive(f"path {path} not found in the query outputs")
    return value


def _number(value: Any, path: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise Inconclusive(f"{path} is not a finite number")
    return float(value)


def _vector(outputs: Mapping[str, Any], path: str) -> list[float]:
    value = _get(outputs, path)
    if not isinstance(value, list | tuple) or not value:
        raise Inconclusive(f"{path} is not a non-empty list of numbers")
    return [_number(item, path) for item in value]


def _result(criterion: StateCriterion, status: CriterionStatus, detail: str) -> CriterionResult:
    return CriterionResult(criterion_id=criterion.id, status=status, detail=detail)
