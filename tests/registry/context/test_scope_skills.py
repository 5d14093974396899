"""The skills scope over a real PAOS home: an installed bundle is named by its name,
version, profiles and SKILL.md sections, routed to the Skills page, never by a path."""

from __future__ import annotations

from pathlib import Path

import pytest

from doraforge.paos.home import PaosHome
from doraforge.registry.context.scopes import SkillsSource
from doraforge.registry.context.scopes.skills import headings
from tests.registry.context.scope_support import SKILL, install_skill, leaks, returned

pytestmark = pytest.mark.anyio


@pytest.fixture
def home(tmp_path: Path) -> PaosHome:
    home = PaosHome(tmp_path / "home")
    install_skill(home, tmp_path, SKILL)
    install_skill(home, tmp_path, "robot-arm")
    return home


async def test_an_installed_skill_is_its_name_version_profiles_and_sections(
    home: PaosHome, tmp_path: Path
) -> None:
    snapshot = await SkillsSource(home).snapshot()
    assert snapshot.status == "fresh"
    assert not snapshot.source_truncated
    by_name = {item.metadata["name"]: item for item in snapshot.items}
    assert set(by_name) == {SKILL, "robot-arm"}
    skill = by_name[SKILL]
    assert skill.kind == "skill"
    assert skill.label == f"{SKILL} 1.0.0"
    assert skill.route == "/console/#/skills"
    assert skill.metadata["version"] == "1.0.0"
    assert skill.metadata["profiles"] == "hardware, sim, sim-openarm, sim-split"
    assert str(skill.metadata["sections"]).startswith("Workflow (as an AgentTask), Tools, Profiles")
    assert skill.counts["required_tools"] == 8
    assert skill.counts["profiles"] == 4
    # The document is private matching text, not returned.
    assert "gripper.grasp" in skill.text
    assert "gripper.grasp" not in returned(skill)
    assert not leaks(snapshot, str(tmp_path), str(home.root))
    assert all("/" not in str(v) or v == skill.route for v in skill.metadata.values())


async def test_references_are_stable_across_snapshots(home: PaosHome) -> None:
    source = SkillsSource(home)
    first, second = await source.snapshot(), await source.snapshot()
    assert [i.ref for i in first.items] == [i.ref for i in second.items]
    assert all(i.ref.startswith("skills:") and SKILL not in i.ref for i in first.items)


async def test_the_scan_cap_keeps_at_most_limit_skills_and_says_so(home: PaosHome) -> None:
    capped = await SkillsSource(home).snapshot(limit=1)
    assert len(capped.items) == 1
    assert capped.source_truncated
    whole = await SkillsSource(home).snapshot(limit=2)
    assert len(whole.items) == 2
    assert not whole.source_truncated


async def test_a_skill_whose_manifest_is_broken_is_listed_with_its_error_code(
    home: PaosHome,
) -> None:
    (home.skills_dir / "robot-arm" / "current" / "skill.yaml").write_text("name: [", "utf-8")
    items = {i.metadata["name"]: i for i in (await SkillsSource(home).snapshot()).items}
    assert items["robot-arm"].metadata["error_code"] == "SKILL_MANIFEST_INVALID"
    assert items[SKILL].metadata["version"] == "1.0.0"


async def test_a_home_without_skills_is_an_empty_fresh_scope(tmp_path: Path) -> None:
    snapshot = await SkillsSource(PaosHome(tmp_path / "empty")).snapshot()
    assert snapshot.items == ()
    assert snapshot.status == "fresh"


def test_headings_skip_the_title_and_fenced_code() -> None:
    document = "# title\n## One\ntext\n```\n## not a heading\n```\n### Two ##\n"
    assert headings(document) == ("One", "Two")
