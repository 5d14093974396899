"""Errors of the Skill Runtime, inside the PAOS error tree."""

from __future__ import annotations

from doraforge.paos.errors import PaosError


class SkillError(PaosError):
    """A skill operation was refused or failed; ``code`` says which rule."""


class ManifestError(SkillError, ValueError):
    """``skill.yaml`` is invalid; the message names the file and the field."""


class ArchiveError(SkillError, ValueError):
    """A bundle or artifact archive is unsafe or does not match its manifest."""


class InstallError(SkillError):
    """Installation failed; the previous installation is intact."""


class RuntimeStateError(SkillError):
    """A runtime lifecycle command was refused or failed (nothing is left running)."""
