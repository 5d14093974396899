"""One structured error base: every package's tree derives from it and has one wire form."""

from __future__ import annotations

import pytest

from doraforge.gateway.errors import GatewayError, Unavailable
from doraforge.paos.errors import PaosError
from doraforge.registry.errors import InvalidRequest, RegistryError, ToolFailure
from doraforge.skill_runtime.errors import SkillError
from doraforge.wire.errors import StructuredError, WireError
from doraforge.wire.strict_json import JSONRefused
from doraforge.wire.strict_yaml import YAMLRefused


@pytest.mark.parametrize(
    "base",
    # The registry raises only the subclasses of its abstract RegistryError.
    [GatewayError, PaosError, InvalidRequest, ToolFailure, SkillError, WireError],
)
def test_every_package_base_is_a_structured_error_with_one_wire_form(
    base: type[StructuredError],
) -> None:
    error = base("SOME_CODE", "what happened", details={"field": "x"})
    assert isinstance(error, StructuredError)
    assert issubclass(RegistryError, StructuredError)
    assert error.to_payload() == {
        "code": "SOME_CODE",
        "message": "what happened",
        "retryable": False,
        "details": {"field": "x"},
    }
    assert not hasattr(error, "to_dict")


def test_a_subclass_may_default_to_retryable_and_a_raiser_may_overrule_it() -> None:
    assert Unavailable("GONE", "endpoint away").retryable is True
    assert Unavailable("GONE", "endpoint away", retryable=False).retryable is False
    assert PaosError("X", "y", retryable=True).to_payload()["retryable"] is True


def test_details_are_copied_so_a_raiser_can_reuse_its_dict() -> None:
    details = {"a": 1}
    error = StructuredError("X", "y", details=details)
    details["a"] = 2
    assert error.details == {"a": 1}


def test_an_edge_refusal_keeps_its_status_and_headers_out_of_the_wire_form() -> None:
    error = WireError("UNAUTHORIZED", "no token", status=401, headers={"WWW-Authenticate": "B"})
    assert (error.status, error.headers) == (401, {"WWW-Authenticate": "B"})
    assert set(error.to_payload()) == {"code", "message", "retryable", "details"}


def test_the_wire_parsers_refusals_are_structured_value_errors() -> None:
    for refusal in (JSONRefused("JSON_NON_FINITE", "NaN"), YAMLRefused("YAML_ALIAS", "alias")):
        assert isinstance(refusal, StructuredError)
        assert isinstance(refusal, ValueError)
    assert YAMLRefused("YAML_ALIAS", "alias", field="a.b", line=3).details == {
        "field": "a.b",
        "line": 3,
    }
