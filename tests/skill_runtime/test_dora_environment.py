"""How Dora finds the interpreter of a ``path: python`` node, in every environment we give it.

Dora resolves a bare node ``path`` with ``uv run which <path>`` whenever ``uv`` is on its
PATH (dora ``libraries/core/src/descriptor/mod.rs``: ``resolve_path`` →
``resolve_path_via_uv``, "Could not find source path python within uv" when uv fails), and
``dora-rs-cli`` installs ``uv`` beside ``dora``. Unpinned, that ``uv run`` locks and syncs
the enclosing project from the network and honours ``$VIRTUAL_ENV``: a ``dora run`` from a
clean checkout failed when the index was out of reach. These tests run Dora's own command
in a hostile directory and require the answer to be this interpreter, offline.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import venv
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest

from doraforge.paos.home import PaosHome
from doraforge.skill_runtime.dora_run import dora_environment
from doraforge.skill_runtime.runtime import RuntimeManager

THIS_PYTHON = Path(sys.executable).parent / "python"


def _runtime_env(base: Mapping[str, str], tmp_path: Path) -> dict[str, str]:
    return RuntimeManager(PaosHome(tmp_path / "paos"), environ=base)._project_env()


BUILDERS: dict[str, Callable[[Mapping[str, str], Path], dict[str, str]]] = {
    "dora run (dora_environment)": lambda base, _tmp: dora_environment(base),
    "Skill Runtime (_project_env)": _runtime_env,
}


@pytest.fixture
def hostile_project(tmp_path: Path) -> Path:
    """A uv project whose lock cannot be resolved, with a ``.venv`` of its own and a
    working directory below it, like ``dataflows/`` in a fresh clone."""
    project = tmp_path / "project"
    (project / "dataflows").mkdir(parents=True)
    (project / "pyproject.toml").write_text(
        '[project]\nname = "hostile"\nversion = "0"\nrequires-python = ">=3.12"\n'
        'dependencies = ["doraforge-test-no-such-distribution==0"]\n',
        encoding="utf-8",
    )
    venv.create(project / ".venv", with_pip=False)
    return project


@pytest.mark.parametrize("builder", BUILDERS.values(), ids=list(BUILDERS))
def test_dora_resolves_python_to_this_interpreter_offline_whatever_the_directory(
    builder: Callable[[Mapping[str, str], Path], dict[str, str]],
    hostile_project: Path,
    tmp_path: Path,
) -> None:
    other_venv = tmp_path / "other-venv"
    venv.create(other_venv, with_pip=False)
    base = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path / "home"),  # an empty uv cache, as under the e2e tests
        "TMPDIR": str(tmp_path),
        "VIRTUAL_ENV": str(other_venv),  # an operator's unrelated active venv
        "UV_DEFAULT_INDEX": "http://127.0.0.1:9/simple",  # any index request fails fast
    }
    env = builder(base, tmp_path)
    # The condition under which Dora asks uv (`which::which("uv")` on its PATH) holds.
    uv = shutil.which("uv", path=env["PATH"])
    assert uv is not None, "dora-rs-cli installs uv beside dora"

    # Exactly what `resolve_path_via_uv` runs, from the dataflow's folder.
    done = subprocess.run(
        [uv, "run", "which", "python"],
        cwd=hostile_project / "dataflows",
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )

    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == str(THIS_PYTHON)
    assert not (hostile_project / "uv.lock").exists()
    assert list(hostile_project.glob(".venv/lib/python*/site-packages/*")) == []


@pytest.mark.parametrize("builder", BUILDERS.values(), ids=list(BUILDERS))
def test_the_callers_uv_settings_cannot_unpin_the_node_interpreter(
    builder: Callable[[Mapping[str, str], Path], dict[str, str]], tmp_path: Path
) -> None:
    base = {"PATH": "/usr/bin:/bin", "UV_PYTHON": "/elsewhere/python", "UV_NO_PROJECT": "0"}
    env = builder(base, tmp_path)
    assert env["PATH"].split(":")[:3] == [str(THIS_PYTHON.parent), "/usr/bin", "/bin"]
    assert env["UV_PYTHON"] == str(THIS_PYTHON)
    assert env["UV_NO_PROJECT"] == "1"
    assert env["UV_PYTHON_DOWNLOADS"] == "never"
    assert env["UV_NO_CACHE"] == "1"
