"""Skill bindings: preview the runtime, freeze it for a task, recheck it on every call.

A binding freezes what a task may rely on: the skill (name, version, manifest and
``SKILL.md`` hashes, profile), the runtime instance, the Gateway URL and identity, and the
SHA-256 of every required ToolSpec. Until the Skill Runtime exists, a candidate can be
built from a Gateway URL and a required-tools list (:meth:`BindingCandidate.adhoc`).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, TypedDict

from pydantic import BaseModel, ConfigDict, ValidationError

from doraforge.paos.errors import PaosError
from doraforge.wire.canonical import sha256_hex


class BindingError(PaosError):
    """A binding cannot be made, or a governed call found it drifted; nothing was sent."""


class ToolApi(Protocol):
    """The part of ``ForgeToolClient`` bindings need."""

    async def list_tools(self) -> dict[str, Any]: ...

    async def tool_spec(self, tool_id: str) -> tuple[dict[str, Any], str]: ...

    async def context(self, tool_id: str) -> dict[str, Any]: ...


@dataclass(frozen=True)
class BindingCandidate:
    """What a task would bind to."""

    skill: str
    version: str
    gateway_url: str
    required_tools: tuple[str, ...]
    profile: str = "default"
    manifest_sha256: str | None = None
    skill_md_sha256: str | None = None
    runtime_instance: str | None = None
    node_artifacts: tuple[str, ...] = field(default_factory=tuple)

    @classmethod
    def adhoc(
        cls, gateway_url: str, required_tools: list[str] | tuple[str, ...]
    ) -> BindingCandidate:
        """A candidate without an installed skill: a Gateway URL and the tools to use."""
        return cls(
            skill="adhoc",
            version="0",
            gateway_url=gateway_url.rstrip("/"),
            required_tools=tuple(sorted(set(required_tools))),
        )


class BoundTool(BaseModel):
    """One required tool as frozen: what it is and the SHA-256 of its ToolSpec."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    semantics: str
    endpoint_id: str
    operation: str
    spec_sha256: str


class PreviewTool(BoundTool):
    """A required tool as the live runtime shows it, with its readiness."""

    ready: bool


class BindingProblem(TypedDict):
    """Why a required tool cannot be bound (``PAOS_TOOL_MISSING``, ``PAOS_TOOL_NOT_READY``)."""

    code: str
    tool_id: str


class BindingPreview(BaseModel):
    """What :func:`preview` read of the live runtime; nothing is stored."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    skill: str
    version: str
    gateway_url: str
    gateway_identity: dict[str, Any]  # the Gateway's identity document (identity_document)
    tools: dict[str, PreviewTool]
    problems: list[BindingProblem]
    #: The robots the required tools act on (their ``robot_frame_profile.robot_id``).
    robots: tuple[str, ...] = ()


class FrozenBinding(BaseModel):
    """What a task is bound to, stored as this document; the binding's SHA-256 is the
    canonical SHA-256 of :meth:`document`. Built by :func:`freeze`, read back with
    :func:`stored`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    skill: str
    version: str
    profile: str
    manifest_sha256: str | None
    skill_md_sha256: str | None
    runtime_instance: str | None
    node_artifacts: tuple[str, ...]
    gateway_url: str
    gateway_identity: dict[str, Any]  # the Gateway's identity document (identity_document)
    tools: dict[str, BoundTool]
    #: The robots the bound tools act on, as their ToolSpecs name them (``robot_id`` of
    #: ``robot_frame_profile``); empty when none does, and in bindings stored before.
    robots: tuple[str, ...] = ()

    def document(self) -> dict[str, Any]:
        """The JSON document that is stored and hashed."""
        return self.model_dump(mode="json")


def stored(document: Mapping[str, Any]) -> FrozenBinding:
    """The :class:`FrozenBinding` of a stored document; :class:`BindingError` when it is not one."""
    try:
        return FrozenBinding.model_validate(document)
    except ValidationError as exc:
        raise BindingError(
            "PAOS_BINDING_INVALID",
            "the task's stored binding is not a frozen binding",
            details={"errors": exc.errors(include_url=False, include_input=False)},
        ) from exc


def identity_document(listing: Mapping[str, Any]) -> dict[str, Any]:
    """The Gateway's identity document from a ``GET /tools`` listing.

    A doraforge Gateway lists the document as ``gateway`` next to the string
    ``gateway_identity`` (its ``instance_id``, the form PhyAgentOS reads); an earlier one
    listed the document itself as ``gateway_identity``; a Gateway that lists only a string
    identity yields ``{"instance_id": that string}``. Whatever the form, ``instance_id``
    changes when the Gateway restarts, which is what :func:`recheck` compares.
    """
    document = listing.get("gateway")
    if isinstance(document, dict):
        return dict(document)
    identity = listing.get("gateway_identity")
    if isinstance(identity, dict):
        return dict(identity)
    if isinstance(identity, str) and identity:
        return {"instance_id": identity}
    raise BindingError("PAOS_BINDING_INVALID", "the Gateway's listing has no identity")


async def preview(api: ToolApi, candidate: BindingCandidate) -> BindingPreview:
    """Read the live runtime for ``candidate``: identity, tools, readiness, problems.

    Raises :class:`BindingError` when the Gateway describes a tool with fields of the
    wrong type.
    """
    listing = await api.list_tools()
    known = {tool["tool_id"] for tool in listing["tools"]}
    tools: dict[str, Any] = {}
    problems: list[BindingProblem] = []
    robots: list[str] = []
    for tool_id in candidate.required_tools:
        if tool_id not in known:
            problems.append({"code": "PAOS_TOOL_MISSING", "tool_id": tool_id})
            continue
        spec, sha256 = await api.tool_spec(tool_id)
        robots.extend(r for r in [_robot_of(spec)] if r and r not in robots)
        context = await api.context(tool_id)
        if not context["ready"]:
            problems.append({"code": "PAOS_TOOL_NOT_READY", "tool_id": tool_id})
        tools[tool_id] = {
            "semantics": spec["semantics"],
            "endpoint_id": spec["endpoint_id"],
            "operation": spec["operation"],
            "spec_sha256": sha256,
            "ready": bool(context["ready"]),
        }
    try:
        return BindingPreview(
            skill=candidate.skill,
            version=candidate.version,
            gateway_url=candidate.gateway_url,
            gateway_identity=identity_document(listing),
            tools=tools,
            problems=problems,
            robots=tuple(robots),
        )
    except ValidationError as exc:
        raise BindingError(
            "PAOS_BINDING_INVALID",
            "the Gateway's catalog does not describe the required tools",
            details={"errors": exc.errors(include_url=False, include_input=False)},
        ) from exc


def _robot_of(spec: Mapping[str, Any]) -> str | None:
    """The robot a ToolSpec says it acts on (``robot_frame_profile.robot_id``), if any."""
    profile = spec.get("robot_frame_profile")
    robot = profile.get("robot_id") if isinstance(profile, Mapping) else None
    return robot if isinstance(robot, str) and robot else None


async def freeze(api: ToolApi, candidate: BindingCandidate) -> tuple[str, str, FrozenBinding]:
    """Revalidate ``candidate`` and return ``(binding_id, sha256, binding)``.

    Raises :class:`BindingError` when a required tool is missing or not ready.
    """
    live = await preview(api, candidate)
    if live.problems:
        raise BindingError(
            "PAOS_BINDING_INVALID",
            "the runtime does not satisfy the skill's required tools",
            details={"problems": live.problems},
        )
    binding = FrozenBinding(
        skill=candidate.skill,
        version=candidate.version,
        profile=candidate.profile,
        manifest_sha256=candidate.manifest_sha256,
        skill_md_sha256=candidate.skill_md_sha256,
        runtime_instance=candidate.runtime_instance,
        node_artifacts=candidate.node_artifacts,
        gateway_url=candidate.gateway_url,
        gateway_identity=live.gateway_identity,
        robots=live.robots,
        tools={
            tool_id: BoundTool.model_validate(tool.model_dump(exclude={"ready"}))
            for tool_id, tool in live.tools.items()
        },
    )
    return f"bind_{uuid.uuid4().hex}", sha256_hex(binding.document()), binding


async def recheck(
    api: ToolApi, binding: FrozenBinding, tool_id: str, semantics: str
) -> dict[str, Any]:
    """Recheck membership, semantics, readiness, ToolSpec hash and runtime identity.

    Returns the live context; raises :class:`BindingError` with a specific code before
    anything is sent when the runtime drifted from the frozen binding.
    """
    bound = binding.tools.get(tool_id)
    if bound is None:
        raise BindingError("PAOS_TOOL_NOT_BOUND", f"{tool_id} is not in the task's binding")
    if bound.semantics != semantics:
        raise BindingError(
            "PAOS_TOOL_SEMANTICS", f"{tool_id} is a {bound.semantics}, not a {semantics}"
        )
    context = await api.context(tool_id)
    details = {"tool_id": tool_id}
    if context.get("gateway_instance_id") != binding.gateway_identity.get("instance_id"):
        raise BindingError(
            "PAOS_RUNTIME_DRIFT",
            "the Gateway runtime changed since the task was bound",
            details=details,
        )
    if context["spec_sha256"] != bound.spec_sha256:
        raise BindingError(
            "PAOS_TOOL_SPEC_DRIFT",
            f"the ToolSpec of {tool_id} changed since binding",
            details=details,
        )
    if not context["ready"]:
        raise BindingError(
            "PAOS_TOOL_NOT_READY", f"{tool_id} is not ready", retryable=True, details=details
        )
    return context


def runtime_key(document: Mapping[str, Any]) -> str:
    """The runtime a stored binding document occupies, as the task store keys its slots.

    An installed skill's runtime is the skill's name (``skill:pick-place``): a restart of
    the same skill gives a new ``runtime_instance`` but drives the same cell, so a task
    left open on the old instance still holds that cell. An ad-hoc binding (no installed
    skill, :meth:`BindingCandidate.adhoc`) occupies its Gateway (``gateway:<url>``).
    """
    skill = document.get("skill")
    if document.get("runtime_instance") is None and skill in (None, "adhoc"):
        return f"gateway:{document.get('gateway_url')}"
    return f"skill:{skill}"
