"""Registry errors map to the wire in one table per edge: HTTP status, MCP fault or isError."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import doraforge.registry
from doraforge.registry.errors import (
    Conflict,
    Expired,
    InvalidRequest,
    RegistryError,
    ToolFailure,
)
from doraforge.registry.gates import Denied
from doraforge.registry.http import STATUS_FOR_ERROR, error_response, status_for
from doraforge.registry.mcp import MCP_FAULT_FOR_ERROR, fault_code_for, refusal_result
from doraforge.wire.errors import StructuredError
from tests.support.mcp_errors import error_of

type ErrorClass = type[RegistryError] | type[ToolFailure]


def _subclasses[E: StructuredError](base: type[E]) -> list[type[E]]:
    found: list[type[E]] = []
    pending = list(base.__subclasses__())
    while pending:
        cls = pending.pop()
        found.append(cls)
        pending.extend(cls.__subclasses__())
    return found


def _registry_errors() -> list[type[RegistryError]]:
    """Every ``RegistryError`` subclass the package defines (all its modules imported)."""
    for module in pkgutil.walk_packages(doraforge.registry.__path__, "doraforge.registry."):
        importlib.import_module(module.name)
    return [cls for cls in _subclasses(RegistryError) if issubclass(cls, RegistryError)]


def _statuses(cls: ErrorClass) -> set[int]:
    return {status for mapped, status in STATUS_FOR_ERROR.items() if issubclass(cls, mapped)}


def _mcp_answers(cls: type[RegistryError]) -> set[int | None]:
    return {code for mapped, code in MCP_FAULT_FOR_ERROR.items() if issubclass(cls, mapped)}


def test_every_registry_error_class_maps_to_exactly_one_status() -> None:
    classes = [*_registry_errors(), ToolFailure, *_subclasses(ToolFailure)]
    assert Denied in classes
    unmapped_or_ambiguous = {c.__name__: _statuses(c) for c in classes if len(_statuses(c)) != 1}
    assert unmapped_or_ambiguous == {}


def test_every_registry_error_class_has_exactly_one_mcp_answer() -> None:
    classes = _registry_errors()
    unmapped_or_ambiguous = {
        c.__name__: _mcp_answers(c) for c in classes if len(_mcp_answers(c)) != 1
    }
    assert unmapped_or_ambiguous == {}


def test_the_base_registry_error_cannot_be_raised_unmapped() -> None:
    with pytest.raises(TypeError):
        RegistryError("TOOL_SOMETHING", "which kind?")


@pytest.mark.parametrize(
    ("error", "status"),
    [
        (InvalidRequest("TOOL_INVALID_CALL", "bad"), 400),
        (Denied("TOOL_CAPABILITY_DENIED", "no grant"), 403),
        (Conflict("TOOL_IDEMPOTENCY_CONFLICT", "taken"), 409),
        (Expired("TOOL_IDEMPOTENCY_EXPIRED", "spent"), 409),
        (ToolFailure("API_ARGUMENT_INVALID", "bad argument"), 422),
    ],
)
def test_an_error_answers_with_its_table_status_and_envelope(
    error: RegistryError | ToolFailure, status: int
) -> None:
    response = error_response(error)
    assert (response.status_code, status_for(error)) == (status, status)
    assert isinstance(response.body, bytes)
    assert response.body.startswith(b'{"ok":false,"error":{"code":"' + error.code.encode())


def test_an_idempotency_refusal_is_a_json_rpc_fault_and_a_bad_call_an_is_error_result() -> None:
    assert fault_code_for(Expired("TOOL_IDEMPOTENCY_EXPIRED", "spent")) == -32000
    result = refusal_result(InvalidRequest("TOOL_INVALID_CALL", "bad"), "r-1")
    assert error_of(result)["code"] == "TOOL_INVALID_CALL"
