"""The approval timeout: 120 s by default, set in the config file or by ``serve
--approval-timeout`` (the option wins), refused out of range naming the field; a registry
that asks nobody lists no approvals."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from doraforge.cli import build_parser
from doraforge.registry.server import build_app, new_service
from doraforge.registry.settings import ServerSettings, SettingsError, load_settings
from tests.registry.server_support import running


def test_the_default_approval_timeout_is_120_seconds() -> None:
    assert load_settings().approval_timeout_s == 120.0


def test_the_config_file_sets_the_timeout_and_the_option_wins(tmp_path: Path) -> None:
    config = tmp_path / "serve.yml"
    config.write_text("approval_timeout_s: 30\n")
    assert load_settings(config=config).approval_timeout_s == 30.0
    assert load_settings(config=config, approval_timeout_s=5.5).approval_timeout_s == 5.5


@pytest.mark.parametrize("value", ["-1", "3601", ".nan"])
def test_a_timeout_out_of_range_is_refused_naming_the_field(tmp_path: Path, value: str) -> None:
    config = tmp_path / "serve.yml"
    config.write_text(f"approval_timeout_s: {value}\n")
    with pytest.raises(SettingsError, match="approval_timeout_s"):
        load_settings(config=config)


def test_serve_takes_an_approval_timeout_in_seconds() -> None:
    args = build_parser().parse_args(["serve", "--approval-timeout", "2.5"])
    assert args.approval_timeout == 2.5
    assert build_parser().parse_args(["serve"]).approval_timeout is None


def test_zero_asks_nobody_and_such_a_registry_lists_no_approvals() -> None:
    settings = ServerSettings(approval_timeout_s=0)
    service = new_service(settings)
    assert service.ask_operators(settings.approval_timeout_s) is None
    with running(build_app(service, settings)) as base:
        listed = httpx.get(f"{base}/api/approvals", timeout=10)
        one = httpx.get(f"{base}/api/approvals/apr_000000000000000000000000", timeout=10)
    assert listed.json() == {"approvals": []}
    assert one.status_code == 404
    assert one.json()["error"]["code"] == "APPROVAL_NOT_FOUND"
