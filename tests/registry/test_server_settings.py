"""Server settings: defaults, strict config files, options over the file, the token variable,
and the ``doraforge serve`` options."""

from __future__ import annotations

from pathlib import Path

import pytest

from doraforge.cli import build_parser
from doraforge.registry.settings import ServerSettings, SettingsError, load_settings


def test_defaults_listen_on_loopback_8765_with_no_grants_and_the_spec_budgets() -> None:
    settings = load_settings()
    assert (settings.host, settings.port) == ("127.0.0.1", 8765)
    assert settings.grants == frozenset()
    assert settings.token is None
    assert (settings.max_result_chars, settings.max_result_items) == (20_000, 25)
    assert settings.outbound == {"default": "deny"}


def test_a_yaml_file_and_options_add_grants_and_options_win(tmp_path: Path) -> None:
    config = tmp_path / "serve.yml"
    config.write_text("port: 9000\ngrants: [robot.read]\ntoken_env: FORGE_TOKEN\n")
    settings = load_settings(
        config=config,
        environ={"FORGE_TOKEN": "a-long-enough-token-value"},
        port=9100,
        grants=["robot.write"],
    )
    assert settings.port == 9100
    assert settings.grants == {"robot.read", "robot.write"}
    assert settings.token == "a-long-enough-token-value"
    assert "a-long-enough" not in repr(settings)


def test_a_json_file_is_read_as_json(tmp_path: Path) -> None:
    config = tmp_path / "serve.json"
    config.write_text('{"mcp_enabled": false, "max_result_items": 10}')
    settings = load_settings(config=config)
    assert settings.mcp_enabled is False
    assert settings.max_result_items == 10


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("prot: 1\n", "prot"),
        ("port: 70000\n", "port"),
        ("grants: [Robot Write]\n", "grants"),
        ("- a\n- b\n", "mapping"),
        ("port: [\n", "YAML"),
    ],
)
def test_a_bad_config_file_names_the_file_and_field(tmp_path: Path, text: str, field: str) -> None:
    config = tmp_path / "serve.yml"
    config.write_text(text)
    with pytest.raises(SettingsError) as caught:
        load_settings(config=config)
    assert str(config) in str(caught.value)
    assert field.lower() in str(caught.value).lower()


def test_an_unset_token_variable_is_refused() -> None:
    with pytest.raises(SettingsError, match="NOPE"):
        load_settings(token_env="NOPE", environ={})


def test_a_short_token_is_refused() -> None:
    with pytest.raises(SettingsError, match="token"):
        load_settings(token_env="T", environ={"T": "short"})


def test_settings_are_closed() -> None:
    with pytest.raises(ValueError, match="extra"):
        ServerSettings.model_validate({"hots": "0.0.0.0"})


def test_serve_options_parse() -> None:
    args = build_parser().parse_args(
        ["serve", "--port", "0", "--grant", "robot.read", "--grant", "robot.write", "--home", "h"]
    )
    assert args.port == 0
    assert args.grant == ["robot.read", "robot.write"]
    assert args.home == Path("h")
    default = build_parser().parse_args(["--home", "g", "serve"])
    assert default.home == Path("g")


def test_mcp_is_off_until_the_option_or_the_config_file_enables_it(tmp_path: Path) -> None:
    assert ServerSettings().mcp_enabled is False
    assert load_settings().mcp_enabled is False
    assert load_settings(mcp=True).mcp_enabled is True
    enabled, disabled = tmp_path / "on.yml", tmp_path / "off.yml"
    enabled.write_text("mcp_enabled: true\n")
    disabled.write_text("mcp_enabled: false\n")
    assert load_settings(config=enabled).mcp_enabled is True
    assert load_settings(config=disabled).mcp_enabled is False
    assert load_settings(config=disabled, mcp=True).mcp_enabled is True


def test_serve_takes_mcp_as_a_switch() -> None:
    assert build_parser().parse_args(["serve", "--mcp"]).mcp is True
    assert build_parser().parse_args(["serve"]).mcp is False


@pytest.mark.parametrize(
    ("name", "text", "named"),
    [
        ("serve.yml", "port: 9000\ngrants: [robot.read]\nport: 9001\n", "port: duplicate key"),
        ("serve.json", '{"port": 9000, "port": 9001}', "duplicate object key 'port'"),
    ],
)
def test_a_duplicate_key_is_refused_naming_the_file_and_field(
    tmp_path: Path, name: str, text: str, named: str
) -> None:
    config = tmp_path / name
    config.write_text(text)
    with pytest.raises(SettingsError) as caught:
        load_settings(config=config)
    assert str(config) in str(caught.value)
    assert named in str(caught.value)
