"""Strict Gateway configuration: hostile YAML is rejected with the field and file named."""

from __future__ import annotations

from pathlib import Path

import pytest

from doraforge.gateway.catalog import Catalog
from doraforge.gateway.config import GatewayConfig, load_config, parse_config
from doraforge.gateway.errors import ConfigError
from tests.gateway.harness import MOCK_CONFIG

SOURCE = "gw.yml"
SHIPPED = MOCK_CONFIG.read_text(encoding="utf-8")


def rejected(text: str) -> str:
    """Parse ``text`` expecting rejection; return the message."""
    with pytest.raises(ConfigError) as caught:
        parse_config(text, SOURCE)
    message = str(caught.value)
    assert message.startswith(f"{SOURCE}: "), message
    return message


def shipped_with(old: str, new: str) -> str:
    assert old in SHIPPED, old
    return SHIPPED.replace(old, new, 1)


def test_shipped_mock_config_loads_with_every_tool_bound_to_a_route() -> None:
    config = load_config(MOCK_CONFIG)
    assert [tool.tool_id for tool in config.tools] == [
        "mock.echo",
        "mock.stats",
        "mock.move",
        "mock.stream",
    ]
    assert [route.endpoint_id for route in config.providers] == ["mock"]
    assert Catalog(config.tools).get("mock.move") is not None


def test_empty_file_yields_defaults() -> None:
    config = parse_config("", SOURCE)
    assert config == GatewayConfig()
    assert config.host == "127.0.0.1"
    assert config.port == 9001


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("port: 1\nport: 2\n", "port"),
        ("retention:\n  max_age_s: 1\n  max_age_s: 2\n", "max_age_s"),
        (
            "providers:\n  - endpoint_id: a\n    input: i\n    output: o\n    input: j\n",
            "input",
        ),
    ],
)
def test_duplicate_keys_are_rejected_at_any_depth(text: str, key: str) -> None:
    message = rejected(text)
    assert f"duplicate key {key!r}" in message
    assert "line" in message


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("hots: 0.0.0.0\n", "hots"),
        ("retention:\n  bogus: 1\n", "retention.bogus"),
        ("providers:\n  - endpoint_id: a\n    input: i\n    output: o\n    qos: 1\n", "qos"),
        (
            shipped_with(
                "    readiness: [endpoint_registered]\n  - tool_id: mock.stats",
                "    readiness: [endpoint_registered]\n    colour: red\n  - tool_id: mock.stats",
            ),
            "tools.0.colour",
        ),
        (shipped_with("robot_id: mock-arm", "robot_id: mock-arm\n      wheels: 4"), "wheels"),
        (shipped_with("axis: z, sign: 1}", "axis: z, sign: 1, scale: 2}"), "scale"),
    ],
)
def test_unknown_keys_are_rejected_at_nested_levels(text: str, field: str) -> None:
    message = rejected(text)
    assert field in message
    assert "Extra inputs are not permitted" in message


@pytest.mark.parametrize("value", ['"true"', "'false'", "yes", "no", "on", "off", "1"])
def test_string_and_yaml11_booleans_are_not_booleans(value: str) -> None:
    message = rejected(f"cancel_on_deadline: {value}\n")
    assert "cancel_on_deadline" in message


def test_real_booleans_are_accepted() -> None:
    assert parse_config("cancel_on_deadline: false\n", SOURCE).cancel_on_deadline is False
    assert parse_config("cancel_on_deadline: True\n", SOURCE).cancel_on_deadline is True


@pytest.mark.parametrize("value", [".nan", ".inf", "-.inf", ".NaN", ".Inf"])
def test_non_finite_numbers_are_rejected(value: str) -> None:
    message = rejected(f"retention:\n  max_age_s: {value}\n")
    assert "retention.max_age_s" in message


@pytest.mark.parametrize("value", [".nan", ".inf", "-.inf"])
def test_non_finite_numbers_inside_tool_schemas_are_rejected(value: str) -> None:
    # An infinity inside input_schema would be published as ``null`` by the JSON dump
    # of the ToolSpec document; it must never get that far.
    text = shipped_with(
        "duration_s: {type: number, minimum: 0, maximum: 3600}",
        f"duration_s: {{type: number, minimum: 0, maximum: {value}}}",
    )
    message = rejected(text)
    assert "tools.2.input_schema" in message
    assert "maximum" in message


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ('port: "9001"\n', "port"),
        ("port: 9001.5\n", "port"),
        ("port: 70000\n", "port"),
        ("lease_ttl_ms: true\n", "lease_ttl_ms"),
        ("lease_ttl_ms: 10\n", "lease_ttl_ms"),
        ("tools: {}\n", "tools"),
        ("providers: mock\n", "providers"),
        ("retention: []\n", "retention"),
        ("retention:\n  max_invocations: '16'\n", "retention.max_invocations"),
        ("host: 127\n", "host"),
        ("journal_path: 3\n", "journal_path"),
    ],
)
def test_wrong_types_and_out_of_range_values_name_the_field(text: str, field: str) -> None:
    assert f"{field}:" in rejected(text)


def test_input_schema_must_be_a_mapping() -> None:
    text = shipped_with(
        "input_schema: {type: object, additionalProperties: false, properties: {}}",
        "input_schema: [object]",
    )
    assert "tools.1.input_schema" in rejected(text)


def test_unknown_readiness_requirement_names_the_tool_and_the_known_names() -> None:
    text = shipped_with(
        "readiness: [endpoint_registered]\n  - tool_id: mock.stats",
        "readiness: [endpoint_alive]\n  - tool_id: mock.stats",
    )
    message = rejected(text)
    assert "tools.0" in message
    assert "endpoint_alive" in message
    assert "endpoint_registered" in message


def test_repeated_readiness_requirement_is_rejected() -> None:
    text = shipped_with(
        "readiness: [endpoint_registered]\n  - tool_id: mock.stats",
        "readiness: [endpoint_registered, endpoint_registered]\n  - tool_id: mock.stats",
    )
    assert "readiness entries must be unique" in rejected(text)


def test_tool_naming_an_unrouted_endpoint_is_rejected() -> None:
    text = shipped_with(
        "    endpoint_id: mock\n    operation: echo", "    endpoint_id: ghost\n    operation: echo"
    )
    message = rejected(text)
    assert "'mock.echo'" in message
    assert "'ghost'" in message
    assert "tools" in message
    assert "route" in message


def test_duplicate_tool_id_is_rejected() -> None:
    message = rejected(shipped_with("tool_id: mock.stats", "tool_id: mock.echo"))
    assert "tools[].tool_id" in message
    assert "'mock.echo'" in message


def test_duplicate_endpoint_operation_pair_is_rejected() -> None:
    message = rejected(shipped_with("operation: stats", "operation: echo"))
    assert "(endpoint, op)" in message
    assert "'echo'" in message


@pytest.mark.parametrize("field", ["endpoint_id", "input", "output"])
def test_duplicate_provider_routes_are_rejected(field: str) -> None:
    text = (
        "providers:\n"
        "  - {endpoint_id: a, input: i1, output: o1}\n"
        "  - {endpoint_id: b, input: i2, output: o2}\n"
    )
    first = {"endpoint_id": "a", "input": "i1", "output": "o1"}[field]
    second = {"endpoint_id": "b", "input": "i2", "output": "o2"}[field]
    text = text.replace(f"{field}: {second}", f"{field}: {first}")
    assert f"providers[].{field} must be unique" in rejected(text)


def test_bad_identifiers_are_rejected() -> None:
    assert "providers.0.input" in rejected(
        "providers:\n  - {endpoint_id: a, input: 'has space', output: o}\n"
    )
    assert "gateway_id" in rejected("gateway_id: ''\n")


def test_default_timeout_above_the_cap_is_rejected() -> None:
    message = rejected("default_timeout_ms: 2000\ninvoke_timeout_cap_ms: 1000\n")
    assert "default_timeout_ms" in message


def test_top_level_must_be_a_mapping() -> None:
    assert "top level must be a mapping" in rejected("- port\n")


def test_unsafe_yaml_tags_are_rejected() -> None:
    message = rejected("host: !!python/object/apply:os.getcwd []\n")
    assert "invalid YAML" in message


def test_load_config_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "gateway.yml"
    path.write_text("port: 1\nport: 1\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=str(path)):
        load_config(path)
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "missing.yml")


def test_invalid_json_schema_is_a_config_error_naming_the_tool() -> None:
    text = shipped_with(
        "message: {type: string, maxLength: 65536}", "message: {type: strin, maxLength: 65536}"
    )
    config = parse_config(text, SOURCE)
    with pytest.raises(ConfigError, match=r"tools\.mock\.echo\.input"):
        Catalog(config.tools)
