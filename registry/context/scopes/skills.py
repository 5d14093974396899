"""The ``skills`` scope: the installed skills of the PAOS home.

Each item: the skill's name, version, profiles and the section headings of its
``SKILL.md``, routed to the console's Skills page. The skill document's text and the
manifest's description are private matching text. Never a path: the bundle's folder is
read through the Skill Runtime's public API and named by nobody.
"""

from __future__ import annotations

import re
from pathlib import Path

from doraforge.paos.errors import PaosError
from doraforge.paos.home import PaosHome
from doraforge.registry.context.scopes._common import HomeSource, bounded
from doraforge.registry.context.source import (
    ContextItem,
    Snapshot,
    SourceError,
    opaque_ref,
)

ROUTE = "/console/#/skills"
#: A skill document is read up to this many bytes (it is matching text, not a payload).
MAX_SKILL_DOCUMENT_BYTES = 64 * 1024
_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")


def headings(document: str) -> tuple[str, ...]:
    """The Markdown headings of ``document`` below its title (level 2 and deeper), in
    order; lines inside fenced code blocks are not headings."""
    found: list[str] = []
    fenced = False
    for line in document.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            continue
        match = None if fenced else _HEADING.match(line)
        if match and len(match.group(1)) >= 2:
            found.append(match.group(2))
    return tuple(found)


def _document(bundle: Path, relative: str) -> str:
    """The skill document's text (bounded); empty when it is missing or leaves the
    bundle (a manifest cannot point the scope at another file)."""
    path = (bundle / relative).resolve()
    if not path.is_relative_to(bundle.resolve()) or not path.is_file():
        return ""
    with path.open("rb") as handle:
        return handle.read(MAX_SKILL_DOCUMENT_BYTES).decode("utf-8", errors="replace")


def _broken(name: str, code: str) -> ContextItem:
    return ContextItem(
        ref=opaque_ref("skills", name),
        scope="skills",
        kind="skill",
        label=f"{name} (unreadable manifest)",
        route=ROUTE,
        metadata={"name": name, "error_code": code},
    )


def _skill(home: PaosHome, name: str) -> ContextItem:
    from doraforge.skill_runtime import current_bundle, installed_manifest

    manifest = installed_manifest(home, name)
    document = _document(current_bundle(home, name), manifest.skill_document)
    sections = headings(document)
    profiles = sorted(manifest.profiles)
    return ContextItem(
        ref=opaque_ref("skills", name),
        scope="skills",
        kind="skill",
        label=f"{name} {manifest.version}",
        route=ROUTE,
        metadata={
            "name": name,
            "version": manifest.version,
            "profiles": ", ".join(profiles),
            "sections": ", ".join(sections),
        },
        counts={
            "profiles": len(profiles),
            "required_tools": len(manifest.required_tools),
            "sections": len(sections),
        },
        text="\n".join((manifest.description, document)),
    )


def _read(home: PaosHome, limit: int) -> Snapshot:
    from doraforge.skill_runtime import installed_skills

    try:
        kept, more = bounded(installed_skills(home), limit)
        items = []
        for skill in kept:
            if skill.error_code is not None:
                items.append(_broken(skill.name, skill.error_code))
                continue
            try:
                items.append(_skill(home, skill.name))
            except PaosError as exc:  # replaced or broken between the listing and the read
                items.append(_broken(skill.name, exc.code))
    except OSError as exc:
        raise SourceError(
            "CONTEXT_SKILLS_UNAVAILABLE",
            "the installed skills cannot be read; check them with `doraforge skill list`",
        ) from exc
    return Snapshot(tuple(items), source_truncated=more)


class SkillsSource(HomeSource):
    """The skills scope of ``home``; raises :class:`SourceError`
    ``CONTEXT_SKILLS_UNAVAILABLE`` when the skills folder cannot be read."""

    scope_name = "skills"

    def read(self, limit: int) -> Snapshot:
        return _read(self._home, limit)
