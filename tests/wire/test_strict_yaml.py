"""The one strict YAML reader: every refusal is a YAMLRefused naming its rule and field."""

from __future__ import annotations

import pytest

from doraforge.wire.strict_yaml import MAX_BYTES, MAX_DEPTH, YAMLRefused, load


def _refused(text: str | bytes, **options: object) -> YAMLRefused:
    with pytest.raises(YAMLRefused) as refused:
        load(text, **options)  # type: ignore[arg-type]
    assert isinstance(refused.value, ValueError)
    return refused.value


def _laughs(levels: int) -> str:
    # Each level lists the previous one ten times: 10**levels nodes from a few lines.
    lines = ["l0: &l0 [x, x, x, x, x, x, x, x, x, x]"]
    for level in range(1, levels + 1):
        refs = ", ".join([f"*l{level - 1}"] * 10)
        lines.append(f"l{level}: &l{level} [{refs}]")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(
    ("text", "code", "field"),
    [
        pytest.param("port: 1\nport: 2\n", "YAML_DUPLICATE_KEY", "port", id="duplicate"),
        pytest.param(
            "retention:\n  max_age_s: 1\n  max_age_s: 2\n",
            "YAML_DUPLICATE_KEY",
            "retention.max_age_s",
            id="nested-duplicate",
        ),
        pytest.param(
            "tools:\n  - a: 1\n  - a: 1\n    a: 2\n",
            "YAML_DUPLICATE_KEY",
            "tools.1.a",
            id="duplicate-in-a-list",
        ),
        pytest.param("x: .inf\n", "YAML_NON_FINITE", "x", id="infinity"),
        pytest.param("x: [1, -.inf]\n", "YAML_NON_FINITE", "x.1", id="negative-infinity"),
        pytest.param("s: {maximum: .NaN}\n", "YAML_NON_FINITE", "s.maximum", id="nan"),
        pytest.param("a: &x [1]\nb: *x\n", "YAML_ALIAS", "<root>", id="alias"),
        pytest.param("? [1, 2]\n: v\n", "YAML_KEY_NOT_SCALAR", "<root>", id="list-key"),
        pytest.param("[" * 100 + "]" * 100, "YAML_TOO_DEEP", "<root>", id="100-deep"),
        pytest.param("k: " + "v" * MAX_BYTES, "YAML_TOO_LARGE", "<root>", id="over-1-MiB"),
        pytest.param("h: !!python/object/apply:os.getcwd []\n", "YAML_INVALID", "<root>", id="tag"),
        pytest.param("key: [unclosed\n", "YAML_INVALID", "<root>", id="truncated"),
        pytest.param(b"k: \xff\n", "YAML_INVALID", "<root>", id="not-utf8"),
    ],
)
def test_hostile_yaml_is_refused_naming_the_rule_and_the_field(
    text: str | bytes, code: str, field: str
) -> None:
    refused = _refused(text)
    assert refused.code == code
    assert refused.field == field
    assert refused.details["field"] == field


def test_a_duplicate_key_names_its_line() -> None:
    refused = _refused("a: 1\nb: 2\na: 3\n")
    assert refused.line == 3
    assert "duplicate key 'a' at line 3" in refused.message


def test_only_true_and_false_are_booleans() -> None:
    document = load("a: yes\nb: no\nc: on\nd: off\ne: true\nf: False\n")
    assert document == {"a": "yes", "b": "no", "c": "on", "d": "off", "e": True, "f": False}


def test_the_size_cap_applies_before_parsing() -> None:
    assert load("k: v\n", max_bytes=5) == {"k": "v"}
    assert _refused("k: vv\n", max_bytes=5).code == "YAML_TOO_LARGE"
    assert _refused(b"k: vv\n", max_bytes=5).code == "YAML_TOO_LARGE"
    assert _refused("k: é\n", max_bytes=5).code == "YAML_TOO_LARGE"  # é is two bytes


def test_nesting_up_to_the_cap_is_accepted() -> None:
    assert load("[" * MAX_DEPTH + "]" * MAX_DEPTH) is not None
    assert _refused("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1)).code == "YAML_TOO_DEEP"
    assert _refused("a: {b: {c: 1}}\n", max_depth=3).code == "YAML_TOO_DEEP"


def test_allowed_aliases_share_their_anchor_value() -> None:
    document = load("a: &v {type: number}\nb: *v\n", aliases=True)
    assert document == {"a": {"type": "number"}, "b": {"type": "number"}}


def test_allowed_aliases_cannot_expand_into_a_huge_tree() -> None:
    assert load(_laughs(2), aliases=True)["l2"][9][9] == ["x"] * 10
    refused = _refused(_laughs(9), aliases=True)
    assert refused.code == "YAML_TOO_LARGE"


def test_allowed_aliases_cannot_nest_past_the_depth_cap() -> None:
    text = "a: &a [[[1]]]\nb: &b [*a]\nc: [*b]\n"
    assert load(text, aliases=True)["c"] == [[[[[1]]]]]
    assert _refused(text, aliases=True, max_depth=6).code == "YAML_TOO_DEEP"


def test_a_recursive_alias_is_refused() -> None:
    assert _refused("&a [1, *a]\n", aliases=True).code == "YAML_ALIAS"


def test_an_empty_document_is_none() -> None:
    assert load("") is None
    assert load("# only a comment\n") is None


def test_yaml_dates_and_integers_keep_their_safe_types() -> None:
    document = load("n: 7\nx: 1.5\nwhen: 2024-01-01\n")
    assert document["n"] == 7
    assert document["x"] == 1.5
    assert str(document["when"]) == "2024-01-01"
