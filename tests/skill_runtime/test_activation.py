"""``activate_skill`` binds to where the running instance is: the runtime's recorded URL."""

from __future__ import annotations

import hashlib
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from doraforge.paos.home import PaosHome
from doraforge.skill_runtime.activation import activate_skill
from doraforge.skill_runtime.errors import ManifestError, RuntimeStateError
from doraforge.skills import source as skill_source

SKILL = "pick-place"


@dataclass(frozen=True)
class _State:
    gateway_url: str
    profile: str = "sim"
    runtime_instance_id: str = "rt-1"


@dataclass
class FakeRuntime:
    state: _State | None

    def healthy_runtime(self, name: str) -> _State:
        if self.state is None:
            raise RuntimeStateError("SKILL_NOT_RUNNING", f"{name!r} is not running")
        return self.state


def _installed(tmp_path: Path) -> PaosHome:
    home = PaosHome(tmp_path / "home")
    shutil.copytree(skill_source(SKILL), home.skills_dir / SKILL / "current")
    return home


def test_the_candidate_names_the_gateway_url_the_runtime_recorded(tmp_path: Path) -> None:
    home = _installed(tmp_path)  # its manifest names http://127.0.0.1:9201
    runtime = FakeRuntime(_State(gateway_url="http://127.0.0.1:9301/"))
    activation = activate_skill(home, SKILL, runtime)
    assert activation.candidate.gateway_url == "http://127.0.0.1:9301"
    assert activation.candidate.runtime_instance == "rt-1"
    assert activation.contract is not None


def test_a_skill_that_is_not_running_is_refused(tmp_path: Path) -> None:
    with pytest.raises(RuntimeStateError) as info:
        activate_skill(_installed(tmp_path), SKILL, FakeRuntime(None))
    assert info.value.code == "SKILL_NOT_RUNNING"


def test_the_activation_carries_the_skill_document_it_hashes(tmp_path: Path) -> None:
    home = _installed(tmp_path)
    activation = activate_skill(home, SKILL, FakeRuntime(_State("http://127.0.0.1:9301")))
    installed = (home.skills_dir / SKILL / "current" / "SKILL.md").read_text(encoding="utf-8")
    assert activation.document == installed
    assert activation.candidate.skill_md_sha256 == hashlib.sha256(installed.encode()).hexdigest()


def test_a_skill_document_that_is_not_utf8_is_a_manifest_error(tmp_path: Path) -> None:
    home = _installed(tmp_path)
    (home.skills_dir / SKILL / "current" / "SKILL.md").write_bytes(b"# pick\xff\xfe place\n")
    with pytest.raises(ManifestError) as info:
        activate_skill(home, SKILL, FakeRuntime(_State("http://127.0.0.1:9301")))
    assert info.value.code == "SKILL_MANIFEST_INVALID"
    assert "not UTF-8" in info.value.message
