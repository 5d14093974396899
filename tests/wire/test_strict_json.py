"""The one strict JSON reader: every refusal is a JSONRefused with its rule's code."""

from __future__ import annotations

import pytest

from doraforge.wire.strict_json import MAX_SAFE_INTEGER, JSONRefused, depth, loads


@pytest.mark.parametrize(
    ("text", "code"),
    [
        pytest.param('{"a": 1, "a": 2}', "JSON_DUPLICATE_KEY", id="duplicate-key"),
        pytest.param('{"x": {"a": 1, "a": 1}}', "JSON_DUPLICATE_KEY", id="nested-duplicate"),
        pytest.param("[NaN]", "JSON_NON_FINITE", id="nan"),
        pytest.param("[-Infinity]", "JSON_NON_FINITE", id="infinity"),
        pytest.param("[1e999]", "JSON_NON_FINITE", id="overflow-to-infinity"),
        pytest.param(str(MAX_SAFE_INTEGER + 1), "JSON_UNSAFE_INTEGER", id="2^53"),
        pytest.param("-" + str(MAX_SAFE_INTEGER + 1), "JSON_UNSAFE_INTEGER", id="-2^53"),
        pytest.param("9" * 5000, "JSON_UNSAFE_INTEGER", id="5000-digits"),
        pytest.param("[" * 100_000 + "]" * 100_000, "JSON_TOO_DEEP", id="100000-deep"),
        pytest.param("[" * 65 + "]" * 65, "JSON_TOO_DEEP", id="65-deep"),
        pytest.param('"\\ud800"', "JSON_LONE_SURROGATE", id="lone-surrogate"),
        pytest.param('{"\\udfff": 1}', "JSON_LONE_SURROGATE", id="lone-surrogate-key"),
        pytest.param("[1,", "INVALID_JSON", id="truncated"),
        pytest.param(b"\xff\xfe", "INVALID_JSON", id="not-utf8"),
        pytest.param("", "INVALID_JSON", id="empty"),
    ],
)
def test_hostile_json_is_refused_with_the_rules_code(text: str | bytes, code: str) -> None:
    with pytest.raises(JSONRefused) as refused:
        loads(text)
    assert refused.value.code == code
    assert isinstance(refused.value, ValueError)


def test_valid_json_reads_as_python_values() -> None:
    value = loads(b'{"a": [1, 2.5, "\\ud83d\\ude00", null, true], "b": {"c": -9007199254740991}}')
    assert value == {"a": [1, 2.5, "\U0001f600", None, True], "b": {"c": -MAX_SAFE_INTEGER}}


def test_nesting_up_to_the_cap_is_accepted() -> None:
    assert depth(loads("[" * 64 + "]" * 64)) == 64
    assert depth(loads('{"a":' * 10 + "1" + "}" * 10, max_depth=10)) == 10
    with pytest.raises(JSONRefused):
        loads('{"a":' * 11 + "1" + "}" * 11, max_depth=10)


def test_many_brackets_inside_strings_do_not_count_as_depth() -> None:
    assert loads('["' + "[" * 500 + '"]') == ["[" * 500]
