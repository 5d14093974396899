"""What the README tells a new user to run runs: each ``python -m doraforge...`` module it
names, and ``make demo`` installing only what the demo needs."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.paths import PROJECT_ROOT

README = (PROJECT_ROOT / "README.md").read_text(encoding="utf-8")
#: Every ``python -m doraforge.X`` the README names.
MODULES = sorted(set(re.findall(r"python -m (doraforge(?:\.\w+)+)", README)))


def test_the_readme_names_runnable_modules() -> None:
    assert "doraforge.nodes.world" in MODULES
    assert "doraforge.cli.demos.pick_place" in MODULES  # the driver of `doraforge run sim`
    assert len(MODULES) >= 8


@pytest.mark.parametrize("module", MODULES)
def test_each_module_the_readme_runs_with_python_m_answers_help(module: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", module, "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=PROJECT_ROOT,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "usage:" in done.stdout


def _dry_run(target: str) -> str:
    done = subprocess.run(
        ["make", "-n", "-B", target],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=PROJECT_ROOT,
        check=True,
    )
    return done.stdout


def test_make_demo_installs_only_the_runtime_quietly_with_a_progress_line() -> None:
    commands = _dry_run("demo")
    assert ".[test]" not in commands
    assert "pip install -q -e ." in commands
    assert "==> installing doraforge" in commands
    # setuptools' editable-install warning (ten lines) is not passed on.
    assert "PYTHONWARNINGS=ignore::UserWarning .venv/bin/python -m pip install -q -e ." in commands


def test_make_test_still_builds_its_own_venv_with_the_test_extras() -> None:
    commands = _dry_run("test-fast")
    assert "-m venv .venv" in commands
    assert "pip install -q -e '.[test]'" in commands
