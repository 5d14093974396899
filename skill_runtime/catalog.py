"""The installed skills of a PAOS home: where each lives and what its manifest says.

The one place that knows the home layout ``skills/<name>/current`` (the installed version)
and ``skills/<name>/previous`` (the one an update replaced); everything outside the Skill
Runtime reads installed skills through these functions, never by building paths.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from doraforge.paos.errors import PaosError
from doraforge.paos.home import PaosHome
from doraforge.skill_runtime.errors import SkillError
from doraforge.skill_runtime.manifest import NAME_PATTERN, SkillManifest, load_manifest
from doraforge.skill_runtime.runtime_state import read_state
from doraforge.wire.suggest import closest, did_you_mean

_NAME = re.compile(NAME_PATTERN)


@dataclass(frozen=True)
class InstalledSkill:
    """One installed skill: its manifest's name, version and Gateway URL, or why its
    manifest cannot be read (``error_code``); and, from its recorded runtime state, the
    lifecycle ``state`` (``None``: never started) and ``running_gateway_url``, where its
    Gateway listens while it runs (``skill start --port`` moves it off the manifest's)."""

    name: str
    version: str | None = None
    gateway_url: str | None = None
    error_code: str | None = None
    state: str | None = None
    running_gateway_url: str | None = None


def skill_dir(home: PaosHome, name: str) -> Path:
    """``skills/<name>``; raises :class:`SkillError` ``SKILL_NAME_INVALID`` for a name the
    manifest would not allow (so no caller can reach outside the skills folder)."""
    if not _NAME.fullmatch(name):
        names = [skill.name for skill in installed_skills(home)]
        have = f"installed: {', '.join(names)}" if names else "no skill is installed"
        raise SkillError(
            "SKILL_NAME_INVALID",
            f"{name[:80]!r} is not a skill name: names are lowercase letters, digits, '.', "
            f"'_' and '-' ({have})",
            details={"pattern": NAME_PATTERN, "installed": names},
        )
    return home.skills_dir / name


def current_bundle(home: PaosHome, name: str) -> Path:
    """The installed version's folder ``skills/<name>/current`` (it may not exist)."""
    return skill_dir(home, name) / "current"


def installed_manifest(home: PaosHome, name: str) -> SkillManifest:
    """The manifest of the installed ``name``; raises ``SKILL_NOT_INSTALLED`` or the
    manifest's ``SKILL_MANIFEST_INVALID``."""
    bundle = current_bundle(home, name)
    if not bundle.is_dir():
        raise not_installed(home, name)
    return load_manifest(bundle)


def not_installed[E: SkillError](
    home: PaosHome,
    name: str,
    kind: type[E] = SkillError,  # type: ignore[assignment]
) -> E:
    """``SKILL_NOT_INSTALLED`` (as ``kind``) for ``name``, naming the skills this home does
    have, the closest of them (a typo is then one look away) and how to install one."""
    names = [skill.name for skill in installed_skills(home)]
    have = f"installed: {', '.join(names)}" if names else "no skill is installed"
    return kind(
        "SKILL_NOT_INSTALLED",
        f"skill {name!r} is not installed ({have}){did_you_mean(name, names)}; "
        "install one with `doraforge skill install ARCHIVE`",
        details={"name": name, "installed": names, "suggestions": closest(name, names)},
    )


def installed_skills(home: PaosHome) -> list[InstalledSkill]:
    """Every installed skill, by name; one whose manifest is unreadable says why."""
    if not home.skills_dir.is_dir():
        return []
    found: list[InstalledSkill] = []
    for entry in sorted(home.skills_dir.iterdir()):
        if not _NAME.fullmatch(entry.name) or not (entry / "current").is_dir():
            continue  # staging folders, locks and stray files are not skills
        try:
            manifest = load_manifest(entry / "current")
        except PaosError as exc:
            found.append(InstalledSkill(entry.name, error_code=exc.code))
            continue
        state, running = _recorded(home, manifest.name)
        found.append(
            InstalledSkill(
                manifest.name,
                manifest.version,
                manifest.gateway_url,
                state=state,
                running_gateway_url=running,
            )
        )
    return found


def _recorded(home: PaosHome, name: str) -> tuple[str | None, str | None]:
    """``name``'s recorded lifecycle state and, while live, its Gateway's URL (an
    unreadable record reads as never started: ``skill status`` names its problem)."""
    try:
        state = read_state(home.runtime_dir, name)
    except (SkillError, OSError):
        return None, None
    if state is None:
        return None, None
    return state.state, state.gateway_url if state.live else None
