"""Every Gateway error a route can raise answers with exactly one status, from one table."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import doraforge.gateway
from doraforge.gateway.errors import GatewayError, NotFound, Unavailable
from doraforge.gateway.http import STATUS_FOR_ERROR, error_response


def _error_classes() -> list[type[GatewayError]]:
    """Every subclass of ``GatewayError`` the package defines (all its modules imported)."""
    for module in pkgutil.iter_modules(doraforge.gateway.__path__):
        if module.name != "__main__":
            importlib.import_module(f"doraforge.gateway.{module.name}")
    found: list[type[GatewayError]] = []
    pending = list(GatewayError.__subclasses__())
    while pending:
        cls = pending.pop()
        found.append(cls)
        pending.extend(cls.__subclasses__())
    return found


def _statuses(cls: type[GatewayError]) -> set[int]:
    return {status for mapped, status in STATUS_FOR_ERROR.items() if issubclass(cls, mapped)}


def test_every_gateway_error_class_maps_to_exactly_one_status() -> None:
    classes = _error_classes()
    assert classes
    unmapped_or_ambiguous = {c.__name__: _statuses(c) for c in classes if len(_statuses(c)) != 1}
    assert unmapped_or_ambiguous == {}


def test_the_table_names_only_gateway_errors() -> None:
    assert all(issubclass(cls, GatewayError) for cls in STATUS_FOR_ERROR)


@pytest.mark.parametrize("cls", _error_classes(), ids=lambda cls: cls.__name__)
def test_an_error_answers_with_its_table_status_and_envelope(cls: type[GatewayError]) -> None:
    response = error_response(cls("FORGE_TOOL_X", "x"))
    assert {response.status_code} == _statuses(cls)
    assert isinstance(response.body, bytes)
    assert response.body.startswith(b'{"ok":false,"msg":"x","error":{"code":"FORGE_TOOL_X"')


def test_a_retryable_unavailability_says_when_to_retry() -> None:
    assert error_response(Unavailable("FORGE_TOOL_BUSY", "busy")).headers["Retry-After"] == "1"
    assert "Retry-After" not in error_response(NotFound("FORGE_TOOL_NOT_FOUND", "no")).headers
