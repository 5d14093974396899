"""Canonical JSON is one byte form per value; every identity in doraforge is its SHA-256."""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any

import pytest

from doraforge.wire.canonical import canonical_bytes, canonical_json, sha256_hex

CORPUS: list[Any] = [
    {"b": 1, "a": [3, 2, 1], "c": {"z": None, "y": True}},
    {"description": "über 到达 😀", "ascii": "plain"},
    [1.5, -0.0, 1e300, 9007199254740991, "", {}],
    'a string with "quotes" and \\ backslashes\n',
    {"nested": {"deeper": {"deepest": [{"k": "v", "a": 0}]}}},
]


def _the_form_peers_compute(value: Any) -> bytes:
    # The expression PAOS and the Gateway each wrote before the form lived here once.
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")


@pytest.mark.parametrize("value", CORPUS)
def test_the_canonical_bytes_are_the_sorted_compact_utf8_form(value: Any) -> None:
    assert canonical_bytes(value) == _the_form_peers_compute(value)
    assert canonical_json(value) == canonical_bytes(value).decode("utf-8")
    assert sha256_hex(value) == hashlib.sha256(_the_form_peers_compute(value)).hexdigest()


def test_keys_are_sorted_at_every_level_and_nothing_is_spaced() -> None:
    assert canonical_json({"b": {"d": 1, "c": 2}, "a": [1, 2]}) == '{"a":[1,2],"b":{"c":2,"d":1}}'


def test_non_ascii_text_is_written_as_utf8_not_escaped() -> None:
    assert canonical_bytes({"k": "é"}) == '{"k":"é"}'.encode()


def test_the_same_value_in_another_key_order_has_the_same_hash() -> None:
    assert sha256_hex({"a": 1, "b": [1, {"x": 1, "y": 2}]}) == sha256_hex(
        {"b": [1, {"y": 2, "x": 1}], "a": 1}
    )


def test_a_pinned_value_keeps_its_pinned_hash() -> None:
    # Frozen in bindings and journals: a change here would invalidate every stored digest.
    assert (
        sha256_hex({"tool_id": "mock.echo", "arguments": {"message": "hi"}})
        == hashlib.sha256(b'{"arguments":{"message":"hi"},"tool_id":"mock.echo"}').hexdigest()
    )


@pytest.mark.parametrize("number", [math.nan, math.inf, -math.inf])
def test_non_finite_numbers_have_no_canonical_form(number: float) -> None:
    with pytest.raises(ValueError, match="JSON compliant"):
        canonical_bytes({"x": number})


def test_a_lone_surrogate_has_no_canonical_bytes() -> None:
    with pytest.raises(ValueError, match="surrogate"):
        sha256_hex({"x": "\ud800"})


def test_a_value_that_is_not_json_data_is_a_type_error() -> None:
    with pytest.raises(TypeError):
        canonical_json({"x": object()})
