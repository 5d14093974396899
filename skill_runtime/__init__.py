"""The Skill Runtime: manifest-v2 bundles, safe installation, and running them on Dora.

This module is the package's public API; the registry and the CLI import from here, not
from the modules inside. Names load on first use, so importing one of them does not pull
in the others (the installer does not need Dora, the catalog needs neither).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

_EXPORTS = {
    "InstalledSkill": "catalog",
    "current_bundle": "catalog",
    "installed_manifest": "catalog",
    "installed_skills": "catalog",
    "skill_dir": "catalog",
    "SkillManifest": "manifest",
    "load_manifest": "manifest",
    "Installer": "installer",
    "AUTO_PORT": "runtime",
    "RuntimeManager": "runtime",
    "RuntimeState": "runtime_state",
    "all_states": "runtime_state",
    "SkillActivation": "activation",
    "pack": "packing",
}

if TYPE_CHECKING:
    from doraforge.skill_runtime.activation import SkillActivation
    from doraforge.skill_runtime.catalog import (
        InstalledSkill,
        current_bundle,
        installed_manifest,
        installed_skills,
        skill_dir,
    )
    from doraforge.skill_runtime.installer import Installer
    from doraforge.skill_runtime.manifest import SkillManifest, load_manifest
    from doraforge.skill_runtime.packing import pack
    from doraforge.skill_runtime.runtime import AUTO_PORT, RuntimeManager
    from doraforge.skill_runtime.runtime_state import RuntimeState, all_states

__all__ = [
    "AUTO_PORT",
    "InstalledSkill",
    "Installer",
    "RuntimeManager",
    "RuntimeState",
    "SkillActivation",
    "SkillManifest",
    "all_states",
    "current_bundle",
    "installed_manifest",
    "installed_skills",
    "load_manifest",
    "pack",
    "skill_dir",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f"{__name__}.{module}"), name)
