"""``activate_skill``: what a healthy running skill offers the PAOS layer to bind a task to."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from doraforge.paos.binding import BindingCandidate
from doraforge.paos.home import PaosHome
from doraforge.skill_runtime.catalog import current_bundle
from doraforge.skill_runtime.manifest import (
    load_manifest,
    manifest_sha256,
    skill_document_sha256,
    skill_document_text,
)


@dataclass(frozen=True)
class SkillActivation:
    """A binding candidate for a running skill, its verification contract template and
    its skill document (the ``SKILL.md`` text an agent reads before acting)."""

    candidate: BindingCandidate
    contract: dict[str, Any] | None
    document: str | None = None


def activate_skill(home: PaosHome, name: str, runtime: Any) -> SkillActivation:
    """Preview the running skill ``name``: installed manifest plus live runtime state.

    The Gateway URL is the one the runtime recorded at start (the manifest's, as it was
    then): that is where the running instance listens and whose identity was just checked,
    even if the installed manifest changed since. Raises the runtime's error when the skill
    is not running or its Gateway does not answer with the identity recorded at start.
    """
    state = runtime.healthy_runtime(name)
    bundle = current_bundle(home, name)
    manifest = load_manifest(bundle)
    profile = manifest.profiles[state.profile]
    tools = set(manifest.required_tools) | set(profile.required_tools or [])
    nodes = manifest.artifacts.nodes.values() if manifest.artifacts else []
    candidate = BindingCandidate(
        skill=manifest.name,
        version=manifest.version,
        gateway_url=(state.gateway_url or manifest.gateway_url).rstrip("/"),
        required_tools=tuple(sorted(tools)),
        profile=state.profile,
        manifest_sha256=manifest_sha256(bundle),
        skill_md_sha256=skill_document_sha256(bundle, manifest),
        runtime_instance=state.runtime_instance_id,
        node_artifacts=tuple(sorted(lock.artifact_id for lock in nodes)),
    )
    contract = manifest.verification
    document = skill_document_text(bundle, manifest)
    return SkillActivation(candidate, dict(contract) if contract else None, document)
