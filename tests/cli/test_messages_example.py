"""``examples/mcp_pick_place.py`` sends the registry's token from a file or a variable, and
a token it cannot use, or a tool's error, is one line, never a traceback."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.paths import PROJECT_ROOT
from tests.support.live_server import serve_process

EXAMPLE = PROJECT_ROOT / "examples" / "mcp_pick_place.py"
TOKEN = "example-registry-token-0123456789"


def example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("mcp_pick_place", EXAMPLE)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # the guard keeps it from running
    return module


def test_a_token_file_becomes_the_bearer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DORAFORGE_REGISTRY_TOKEN", raising=False)
    path = tmp_path / "token"
    path.write_text(TOKEN + "\n", encoding="utf-8")
    path.chmod(0o600)
    module = example()
    args = module.arguments(["--token-file", str(path), "http://127.0.0.1:1/mcp"])
    assert args.url == "http://127.0.0.1:1/mcp"
    assert module.bearer(args) == {"Authorization": f"Bearer {TOKEN}"}


def test_a_named_variable_or_the_default_one_becomes_the_bearer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    module = example()
    monkeypatch.setenv("MY_TOKEN", TOKEN)
    assert module.bearer(module.arguments(["--token-env", "MY_TOKEN"]))["Authorization"].endswith(
        TOKEN
    )
    monkeypatch.delenv("DORAFORGE_REGISTRY_TOKEN", raising=False)
    assert module.bearer(module.arguments([])) == {}
    monkeypatch.setenv("DORAFORGE_REGISTRY_TOKEN", TOKEN)
    assert module.bearer(module.arguments([])) == {"Authorization": f"Bearer {TOKEN}"}


def test_a_token_file_others_can_read_is_refused_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text(TOKEN, encoding="utf-8")
    path.chmod(0o644)
    done = subprocess.run(
        [sys.executable, str(EXAMPLE), "--token-file", str(path), "http://127.0.0.1:1/mcp"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1
    assert done.stderr.startswith("mcp_pick_place: ")
    assert TOKEN not in done.stderr


def test_a_tools_error_ends_the_script_in_its_code_and_message_line(tmp_path: Path) -> None:
    # A registry that grants no writes: forge_task_create is refused, as an isError result.
    with serve_process(tmp_path, "--mcp", "--grant", "robot.read") as serve:
        done = subprocess.run(
            [sys.executable, str(EXAMPLE), f"{serve.base_url}/mcp"],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert done.returncode == 1, done.stderr
    assert done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith("mcp_pick_place: TOOL_"), done.stderr
    assert "Traceback" not in done.stderr
