"""The installed-skills catalog: the one reader of the home's skills layout."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from doraforge.paos.home import PaosHome
from doraforge.skill_runtime import (
    current_bundle,
    installed_manifest,
    installed_skills,
    skill_dir,
)
from doraforge.skill_runtime.errors import SkillError
from doraforge.skills import source


def test_installed_skills_lists_manifests_and_says_why_one_is_unreadable(tmp_path: Path) -> None:
    home = PaosHome(tmp_path)
    shutil.copytree(source("pick-place"), current_bundle(home, "pick-place"))
    broken = current_bundle(home, "broken")
    broken.mkdir(parents=True)
    (broken / "skill.yaml").write_text("manifest_version: 2\nname: [\n")
    (home.skills_dir / ".staging-1").mkdir()  # not a skill name: ignored
    found = {skill.name: skill for skill in installed_skills(home)}
    assert set(found) == {"pick-place", "broken"}
    assert found["pick-place"].version is not None
    gateway_url = found["pick-place"].gateway_url
    assert gateway_url is not None
    assert gateway_url.startswith("http://127.0.0.1:")
    assert found["broken"].error_code == "SKILL_MANIFEST_INVALID"


def test_a_skill_that_is_not_installed_is_a_coded_error(tmp_path: Path) -> None:
    with pytest.raises(SkillError) as refused:
        installed_manifest(PaosHome(tmp_path), "pick-place")
    assert refused.value.code == "SKILL_NOT_INSTALLED"


@pytest.mark.parametrize("name", ["../etc", "a/b", "", ".hidden", "UPPER", "x" * 65])
def test_a_name_the_manifest_would_refuse_never_becomes_a_path(tmp_path: Path, name: str) -> None:
    with pytest.raises(SkillError) as refused:
        skill_dir(PaosHome(tmp_path), name)
    assert refused.value.code == "SKILL_NAME_INVALID"


def test_an_empty_home_has_no_skills(tmp_path: Path) -> None:
    assert installed_skills(PaosHome(tmp_path / "nothing-here")) == []
