"""The context tools' settings: ``context_profile`` and ``context_scopes`` in the config file
and as ``serve --context-profile`` / ``--context-scope`` (which replaces the default set),
refused in one line naming the field."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from doraforge.registry.settings import DEFAULT_CONTEXT_SCOPES, SettingsError, load_settings
from tests.paths import PROJECT_ROOT
from tests.support.live_server import serve_process


def test_the_default_is_metadata_over_navigation_skills_tools_and_runtime() -> None:
    settings = load_settings()
    assert settings.context_profile == "metadata"
    assert settings.context_scopes == {"navigation", "skills", "tools", "runtime"}
    assert settings.context_scopes == DEFAULT_CONTEXT_SCOPES


def test_options_override_the_file_and_scopes_replace_the_default(tmp_path: Path) -> None:
    config = tmp_path / "serve.yml"
    config.write_text("context_profile: summaries\ncontext_scopes: [tasks, evidence]\n")
    from_file = load_settings(config=config)
    assert from_file.context_profile == "summaries"
    assert from_file.context_scopes == {"tasks", "evidence"}
    overridden = load_settings(config=config, context_profile="metadata", context_scopes=["skills"])
    assert overridden.context_profile == "metadata"
    assert overridden.context_scopes == {"skills"}
    config.write_text("context_scopes: []\n")
    assert load_settings(config=config).context_scopes == frozenset()  # every scope off


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("context_profile: everything\n", "context_profile"),
        ("context_scopes: [skills, vault]\n", "context_scopes"),
        ("context_scopes: skills\n", "context_scopes"),
    ],
)
def test_a_bad_context_setting_is_one_line_naming_the_field(
    tmp_path: Path, text: str, field: str
) -> None:
    config = tmp_path / "serve.yml"
    config.write_text(text)
    with pytest.raises(SettingsError) as refused:
        load_settings(config=config)
    message = str(refused.value)
    assert "\n" not in message
    assert message.startswith(f"{config}: {field}")


def test_serve_refuses_an_unknown_scope_option_naming_the_choices() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "doraforge.cli", "serve", "--context-scope", "vault"],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert "--context-scope" in done.stderr
    assert "navigation" in done.stderr
    assert "Traceback" not in done.stderr


def test_serve_reports_the_profile_and_scopes_it_was_given(tmp_path: Path) -> None:
    options = ("--mcp", "--context-profile", "summaries", "--context-scope", "tasks")
    with serve_process(tmp_path, *options) as serve:
        manifest = httpx.get(f"{serve.base_url}/api/agent-context/manifest", timeout=10).json()
    assert manifest["profile"] == "summaries"
    assert [s["name"] for s in manifest["scopes"] if s["enabled"]] == ["tasks"]
    assert "Traceback" not in serve.errors()
