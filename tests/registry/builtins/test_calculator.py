"""``builtin.calculator``: arithmetic by AST evaluation only, bounded, through the registry."""

from __future__ import annotations

import time
from typing import Any

import pytest

from doraforge.registry.builtins.calculator import evaluate
from doraforge.registry.errors import ToolFailure
from doraforge.registry.settings import ServerSettings
from tests.registry.builtins.conftest import call, caller, service_with

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    ("expression", "value"),
    [
        ("2 + 3 * 4", 14),
        ("(2 + 3) * 4", 20),
        ("7 // 2", 3),
        ("-7 % 3", 2),
        ("2 ** 10", 1024),
        ("2 ** -1", 0.5),
        ("-(3)", -3),
        ("+4.5", 4.5),
        ("10 / 4", 2.5),
        ("sqrt(16)", 4.0),
        ("round(2.567, 2)", 2.57),
        ("max(1, 5, 3) - min(4, 2)", 3),
        ("log(8, 2)", 3.0),
        ("floor(pi) + ceil(e)", 6),
        ("abs(-2) * hypot(3, 4)", 10.0),
        ("1_000 * 3", 3000),
    ],
)
async def test_valid_arithmetic_evaluates(expression: str, value: Any) -> None:
    assert evaluate(expression) == pytest.approx(value)


@pytest.mark.parametrize(
    ("expression", "code"),
    [
        ("__import__('os').system('true')", "CALCULATOR_INVALID_EXPRESSION"),
        ("(1).__class__", "CALCULATOR_INVALID_EXPRESSION"),
        ("x + 1", "CALCULATOR_INVALID_EXPRESSION"),
        ("open('/etc/passwd')", "CALCULATOR_INVALID_EXPRESSION"),
        ("math.sqrt(4)", "CALCULATOR_INVALID_EXPRESSION"),
        ("'a' * 3", "CALCULATOR_INVALID_EXPRESSION"),
        ("[1, 2][0]", "CALCULATOR_INVALID_EXPRESSION"),
        ("lambda: 1", "CALCULATOR_INVALID_EXPRESSION"),
        ("True + 1", "CALCULATOR_INVALID_EXPRESSION"),
        ("1 if 1 else 2", "CALCULATOR_INVALID_EXPRESSION"),
        ("1 < 2", "CALCULATOR_INVALID_EXPRESSION"),
        ("round(2.5, ndigits=1)", "CALCULATOR_INVALID_EXPRESSION"),
        ("(-8) ** 0.5", "CALCULATOR_INVALID_EXPRESSION"),
        ("2 +", "CALCULATOR_INVALID_EXPRESSION"),
        ("1 / 0", "CALCULATOR_MATH_ERROR"),
        ("sqrt(-1)", "CALCULATOR_MATH_ERROR"),
        ("min()", "CALCULATOR_MATH_ERROR"),
        ("9 ** 9 ** 9", "CALCULATOR_LIMIT_EXCEEDED"),
        ("10 ** 2000", "CALCULATOR_LIMIT_EXCEEDED"),
        ("2.0 ** 5000", "CALCULATOR_LIMIT_EXCEEDED"),
        ("exp(1000)", "CALCULATOR_LIMIT_EXCEEDED"),
        ("10**1000 * 10**1000 * 10**1000 * 10**1000 * 10**1000", "CALCULATOR_LIMIT_EXCEEDED"),
        ("round(5, -10 ** 9)", "CALCULATOR_LIMIT_EXCEEDED"),
        ("+".join(["1"] * 240), "CALCULATOR_LIMIT_EXCEEDED"),
        ("1" * 501, "CALCULATOR_LIMIT_EXCEEDED"),
    ],
)
async def test_refused_constructs_and_limits(expression: str, code: str) -> None:
    with pytest.raises(ToolFailure) as refused:
        evaluate(expression)
    assert refused.value.code == code
    assert (
        "use " in refused.value.message
        or "fix" in refused.value.message
        or "change" in (refused.value.message)
    )


async def test_a_power_tower_is_refused_fast_not_computed() -> None:
    started = time.perf_counter()
    for tower in ("9**9**9", "99999**99999**99999", "(10**100)**(10**100)"):
        with pytest.raises(ToolFailure) as refused:
            evaluate(tower)
        assert refused.value.code == "CALCULATOR_LIMIT_EXCEEDED"
    assert time.perf_counter() - started < 0.5


async def test_through_the_registry_it_completes_and_refusals_are_failed_results() -> None:
    service = service_with(ServerSettings(builtins={"enabled": ["calculator"]}))
    agent = caller(permissions=frozenset())  # the calculator needs no permission
    done = await call(service, "calculator", {"expression": "2 + 3 * 4"}, agent)
    assert done["state"] == "completed"
    assert done["name"] == "builtin.calculator"
    assert done["result"] == {"expression": "2 + 3 * 4", "value": 14}
    refused = await call(service, "builtin.calculator", {"expression": "9**9**9"}, agent)
    assert refused["state"] == "failed"
    assert refused["error"]["code"] == "CALCULATOR_LIMIT_EXCEEDED"
    too_long = await call(service, "calculator", {"expression": "1" * 501}, agent)
    assert too_long["state"] == "denied"
    assert too_long["error"]["code"] == "TOOL_INVALID_ARGUMENTS"


async def test_the_entry_is_low_risk_read_and_needs_no_permission() -> None:
    service = service_with(ServerSettings(builtins={"enabled": ["calculator"]}))
    entry = service.resolve("calculator")
    assert entry is not None
    assert (entry.policy.risk, entry.policy.sideEffect) == ("low", "read")
    assert entry.policy.permissions == []
    assert entry.policy.egressHosts == []
    assert [e.name for e in service.entries()] == ["builtin.calculator"]
