"""How PAOS and Skill Runtime errors become the registry errors a console route raises."""

from __future__ import annotations

import pytest

from doraforge.console.errors import translated
from doraforge.paos.errors import ForgeHttpError, ForgeTransportError, PaosError
from doraforge.registry.errors import (
    Conflict,
    InvalidRequest,
    NotFound,
    ToolFailure,
    Unprocessable,
)
from doraforge.registry.http import status_for


@pytest.mark.parametrize(
    ("status", "expected"),
    [
        (400, InvalidRequest),
        (404, NotFound),
        (409, Conflict),
        (410, Conflict),
        (422, Unprocessable),
    ],
)
def test_a_gateway_refusal_keeps_its_code_and_meaning(status: int, expected: type) -> None:
    refusal = ForgeHttpError(
        "FORGE_TOOL_X", "refused", status_code=status, payload=None, details={"tool_id": "a"}
    )
    error = translated(refusal)
    assert type(error) is expected
    assert (error.code, error.details) == ("FORGE_TOOL_X", {"tool_id": "a"})
    assert 400 <= status_for(error) < 500


def test_a_gateway_fault_is_a_tool_failure_not_a_5xx() -> None:
    fault = ForgeHttpError("FORGE_TOOL_BUSY", "busy", status_code=503, payload=None, retryable=True)
    error = translated(fault)
    assert type(error) is ToolFailure
    assert error.retryable is True
    assert status_for(error) == 422


def test_an_unreachable_gateway_says_the_remote_state_is_unknown() -> None:
    error = translated(ForgeTransportError("FORGE_CLIENT_TRANSPORT", "connection reset"))
    assert type(error) is ToolFailure
    assert error.details["remoteState"] == "unknown"


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        ("SKILL_NOT_INSTALLED", NotFound),
        ("SKILL_NAME_INVALID", InvalidRequest),
        ("SKILL_RUNTIME_IN_USE", Conflict),
        ("SKILL_PROFILE_REQUIRED", Unprocessable),
        ("SKILL_START_TIMEOUT", ToolFailure),
    ],
)
def test_skill_runtime_codes_map_by_what_went_wrong(code: str, expected: type) -> None:
    error = translated(PaosError(code, "why", details={"blockers": ["task_1"]}))
    assert type(error) is expected
    assert error.details == {"blockers": ["task_1"]}
