"""The PAOS robot tools as governed semantic tools: ``forge.*`` entries over ``paos``.

Every ``forge_*`` agent tool of :mod:`paos.agent_tools` becomes ``forge.<rest>`` with its
provider name kept, reads under ``robot.read`` and writes under ``robot.write``, with the
side effect and risk the tool declares where it is defined (undeclared: a high-risk write);
anything that moves the robot (starting an Action or a Session) is ``high`` risk and needs
an explicit approval. Three context reads join them: installed skills, runtime status and a
running skill's tool contexts; and two frame reads (:mod:`registry.frames`): a running
skill's newest camera frame and a task's evidence frame, as bounded JPEG images. An agent
tool's ``{ok: false}`` answer becomes a :class:`~registry.errors.ToolFailure`; the
registry never sees a PAOS exception. Its ``data`` is the call's result as it is,
PhyAgentOS 1.1.1's answer fields included (:mod:`paos.phyagentos_answers`;
``activate_skill`` keeps its top-level ones in ``data`` too), so an agent reads the same
fields over MCP as from PhyAgentOS's own tools.

No tool takes a URL: where PAOS accepts ``gateway_url`` the registry offers ``skill``
(:mod:`registry.robot_schemas`) and resolves the installed, running skill's Gateway itself
(:mod:`registry.skill_gateway`). Every Gateway is reached through the TaskService's one
bounded set of clients, and failures reach agents without internal exception text.

One registry may front several running skills (cells). A diagnostic call that names
neither ``skill`` nor ``task_id`` while more than one skill runs is refused
``SKILL_AMBIGUOUS`` with the running skills as candidates, never sent to a guess; and
every ``forge.*`` call's audit records and approval name the cell it concerns
(:mod:`registry.cells`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from doraforge.paos.agent_tools import TOOLS, AgentTool, Risk, SideEffect
from doraforge.paos.errors import PaosError
from doraforge.paos.home import PaosHome
from doraforge.registry import frames
from doraforge.registry.audit import AuditLog, CellName
from doraforge.registry.cells import CellNames, running_cells
from doraforge.registry.errors import ToolFailure
from doraforge.registry.model import Adapter, CallContext, ContextAdapter
from doraforge.registry.robot_schemas import (
    CAMERA_FRAME_INPUT,
    EVIDENCE_FRAME_INPUT,
    SKILL,
    SKILL_ROUTED,
    agent_form,
    camera_frame_output,
    evidence_frame_output,
    output_of,
)
from doraforge.registry.skill_gateway import SkillGateways, agent_safe
from doraforge.registry.task_owner import TaskOwnership

if TYPE_CHECKING:
    from doraforge.registry.service import RegistryService

log = logging.getLogger(__name__)

READ = "robot.read"
WRITE = "robot.write"
SCOPES = ["agent", "ui"]
_OUTPUT = {"type": "object"}
_TIMEOUTS_MS = {"forge_task_finalize": 180_000, "forge_task_cancel": 120_000}
#: Failures that say the skill's Gateway itself is gone or another one: the next call
#: checks the skill's health again instead of trusting the cached check.
_GATEWAY_GONE = frozenset({"FORGE_CLIENT_TRANSPORT", "FORGE_CLIENT_TIMEOUT", "PAOS_RUNTIME_DRIFT"})

type TaskServiceFactory = Callable[[], Any]


def _entry(
    name: str,
    provider: str,
    description: str,
    schema: dict[str, Any],
    side_effect: SideEffect | None,
    risk: Risk | None,
    output_schema: dict[str, Any] = _OUTPUT,
) -> dict[str, Any]:
    """A catalog entry; an undeclared side effect is a write and an undeclared risk high,
    so a tool nobody classified can never pass as a harmless read."""
    write = side_effect != "read"
    return {
        "name": name,
        "providerName": provider,
        "aliases": [],
        "description": description,
        "input_schema": schema,
        "output_schema": output_schema,
        "policy": {
            "scopes": SCOPES,
            "requiredCapabilities": [WRITE if write else READ],
            "sideEffect": "write" if write else "read",
            "idempotent": not write,
            "risk": risk or "high",
            "timeoutMs": _TIMEOUTS_MS.get(provider, 30_000),
        },
    }


def _as_object(data: Any) -> dict[str, Any]:
    return data if isinstance(data, dict) else {"value": data}


def _agent_safe(adapter: Adapter) -> Adapter:
    """``adapter`` whose failures carry no internal exception text (see ``agent_safe``)."""

    async def safe(arguments: dict[str, Any]) -> Any:
        try:
            return await adapter(arguments)
        except ToolFailure as failure:
            raise agent_safe(failure) from failure

    return safe


@dataclass
class RobotTools:
    """The adapters' shared state: the PAOS home and one lazily opened TaskService."""

    home: PaosHome
    task_service_factory: TaskServiceFactory
    runtime_factory: Callable[[], Any] | None = None
    #: This registry as the owner of the tasks its agents open (``None``: tasks unowned).
    ownership: TaskOwnership | None = None
    _task_service: Any = field(default=None, repr=False)
    #: Resolves a ``skill`` argument to its installed, running Gateway (never a caller's URL).
    gateways: SkillGateways = field(init=False, repr=False)
    #: Names the cell (skill, runtime instance, robot) each call concerns.
    cells: CellNames = field(init=False, repr=False)
    _runtime: Callable[[], Any] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._runtime = self.runtime_factory or _default_runtime(self.home)
        self.gateways = SkillGateways(
            self.home, self._runtime, lister=self._list_tools, vouch=self._vouch
        )
        self.cells = CellNames(self.home, self.task_service, self.gateways.url)

    async def cell_of(self, tool: str, arguments: Mapping[str, Any]) -> CellName | None:
        """The wire form of the cell a call of ``tool`` concerns (``None``: no one cell)."""
        cell = await self.cells.of_call(tool, arguments)
        return None if cell is None else cell.public()

    async def _list_tools(self, gateway_url: str) -> Mapping[str, Any]:
        """``GET /tools`` through the TaskService's pooled client of ``gateway_url``."""
        listing: Mapping[str, Any] = await self.task_service().client(gateway_url).list_tools()
        return listing

    def _vouch(self, gateway_url: str, listing: Mapping[str, Any], trusted_for_s: float) -> None:
        """The health check's listing, vouched for: diagnostic Queries read specs from it."""
        self.task_service().vouch_gateway(gateway_url, dict(listing), trusted_for_s=trusted_for_s)

    def task_service(self) -> Any:
        """The TaskService, opened on first use (inside the server's event loop)."""
        if self._task_service is None:
            self._task_service = self.task_service_factory()
        return self._task_service

    async def start(self) -> None:
        """Take ownership of the tasks agents open here, ending the stale ones earlier
        registries left (:mod:`registry.task_owner`); nothing without ``ownership``."""
        if self.ownership is None:
            return
        try:
            service = self.task_service()
        except PaosError:  # the store did not open: each call reports it, as before
            log.exception("the task store did not open; stale agent tasks were not checked")
            return
        await self.ownership.start(service)

    async def aclose(self) -> None:
        """End the tasks this registry owns (bounded), then close the TaskService."""
        if self.ownership is not None and self._task_service is not None:
            await self.ownership.stop(self._task_service)
        service, self._task_service = self._task_service, None
        if service is not None:
            await service.aclose()
            service.store.close()

    def agent_adapter(self, tool: AgentTool) -> Callable[[dict[str, Any]], Awaitable[Any]]:
        """The registry adapter of one agent tool: ``{ok: false}`` becomes a ToolFailure.

        A failure whose remote state is unknown (the request may have reached the robot)
        stays state ``failed`` as the spec has no other, but carries
        ``remoteState: "unknown"`` and is never retryable, exactly like a write that timed
        out in the gates: an agent must reconcile by reading, never call again.
        """

        def failure(error: dict[str, Any]) -> ToolFailure:
            skip = ("code", "message", "remote_state")
            details = {k: v for k, v in error.items() if k not in skip}
            unknown = error.get("remote_state") == "unknown"
            if unknown:
                details.update(remoteState="unknown", retryable=False)
            retryable = bool(error.get("retryable")) and not unknown
            return ToolFailure(
                error["code"], error["message"], retryable=retryable, details=details
            )

        async def adapter(arguments: dict[str, Any]) -> Any:
            try:
                service = self.task_service()
            except PaosError as exc:  # the store did not open: nothing was sent anywhere
                raise ToolFailure(exc.code, exc.message, retryable=exc.retryable) from exc
            if self.ownership is None:
                answer = await tool(service, arguments)
            else:
                answer = await self.ownership.call(tool, service, arguments)
            if not answer["ok"]:
                raise failure(answer["error"])
            return _as_object(answer["data"])

        return adapter

    def skill_adapter(self, tool: AgentTool) -> Adapter:
        """The adapter of a PAOS tool whose diagnostic form needs a Gateway: a ``skill``
        argument becomes the ``gateway_url`` of that installed, running skill, resolved
        here before anything is dialled; a ``task_id`` call passes through unchanged."""
        bound = self.agent_adapter(tool)

        async def adapter(arguments: dict[str, Any]) -> Any:
            if "skill" not in arguments:
                if "task_id" not in arguments:
                    await self._one_cell_running()
                return await bound(arguments)
            rest = {k: v for k, v in arguments.items() if k != "skill"}
            gateway_url = await self.gateways.url(arguments["skill"])
            try:
                return await bound({**rest, "gateway_url": gateway_url})
            except ToolFailure as failure:
                if failure.code in _GATEWAY_GONE:
                    self.gateways.forget(arguments["skill"])
                raise

        return adapter

    async def _one_cell_running(self) -> None:
        """Refuse ``SKILL_AMBIGUOUS`` when a call naming no skill could mean several."""
        cells = await asyncio.to_thread(running_cells, self.home)
        if len(cells) <= 1:
            return
        names = ", ".join(cell.skill for cell in cells)
        raise ToolFailure(
            "SKILL_AMBIGUOUS",
            f"{len(cells)} skills are running ({names}); name one with skill, "
            "or pass the task_id of a task bound to one",
            details={"candidates": [cell.public() for cell in cells]},
        )

    async def installed_skills(self, _arguments: dict[str, Any]) -> dict[str, Any]:
        return {"skills": await asyncio.to_thread(_installed, self.home)}

    async def runtime_status(self, arguments: dict[str, Any]) -> dict[str, Any]:
        return {"runtimes": await asyncio.to_thread(self._runtimes, arguments.get("skill"))}

    def _runtimes(self, skill: str | None) -> list[dict[str, Any]]:
        from doraforge.skill_runtime import all_states

        try:
            runtime = self._runtime()
            if skill is not None:
                state = runtime.status(skill)
                states = [] if state is None else [state]
            else:
                states = [runtime.status(s.name) for s in all_states(self.home.runtime_dir)]
        except PaosError as exc:
            raise ToolFailure(exc.code, exc.message, retryable=exc.retryable) from exc
        return [s.model_dump(mode="json") for s in states if s is not None]

    async def tool_contexts(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """Every tool of the running skill's Gateway, through its one shared client."""
        gateway_url = await self.gateways.url(arguments["skill"])
        try:
            client = self.task_service().client(gateway_url)
            listing = await client.list_tools()
            tools = [
                {
                    "tool_id": tool["tool_id"],
                    "semantics": tool.get("semantics"),
                    "description": tool.get("description"),
                    "context": await client.context(tool["tool_id"]),
                }
                for tool in listing.get("tools", [])
            ]
        except PaosError as exc:
            if exc.code in _GATEWAY_GONE:
                self.gateways.forget(arguments["skill"])
            raise ToolFailure(exc.code, exc.message, retryable=exc.retryable) from exc
        # Schemas are left out to stay within the result budget; forge.tool_context has them.
        return {"gateway_url": gateway_url, "tools": tools}


def _default_runtime(home: PaosHome) -> Callable[[], Any]:
    def build() -> Any:
        from doraforge.skill_runtime import RuntimeManager

        return RuntimeManager(home)

    return build


def _installed(home: PaosHome) -> list[dict[str, Any]]:
    from doraforge.skill_runtime import installed_skills

    skills: list[dict[str, Any]] = []
    for skill in installed_skills(home):
        if skill.error_code is not None:
            skills.append({"name": skill.name, "error": {"code": skill.error_code}})
        else:
            skills.append(
                {
                    "name": skill.name,
                    "version": skill.version,
                    "state": skill.state or "never started",
                    # Where it runs now (runtime state), never the manifest's default.
                    "gateway_url": skill.running_gateway_url,
                    "manifest_gateway_url": skill.gateway_url,
                }
            )
    return skills


def _context_entries(tools: RobotTools) -> list[tuple[dict[str, Any], Any]]:
    closed = {"type": "object", "additionalProperties": False}
    return [
        (
            _entry(
                "forge.skills.installed",
                "forge_skills_installed",
                "List the installed skills of this PAOS home: name, version, runtime state "
                "and gateway_url, the Gateway a running skill listens on (null when it is "
                "not running; manifest_gateway_url is its manifest's default).",
                {**closed, "properties": {}},
                "read",
                "low",
            ),
            tools.installed_skills,
        ),
        (
            _entry(
                "forge.runtime.status",
                "forge_runtime_status",
                "Runtime state of one installed skill (or all recorded ones), live-checked.",
                {**closed, "properties": {"skill": SKILL}},
                "read",
                "low",
            ),
            tools.runtime_status,
        ),
        (
            _entry(
                "forge.tool_contexts",
                "forge_tool_contexts",
                "Every tool of a running skill's Gateway: id, kind, description, live context.",
                {**closed, "required": ["skill"], "properties": {"skill": SKILL}},
                "read",
                "low",
            ),
            tools.tool_contexts,
        ),
        *_frame_entries(tools),
    ]


def _frame_entries(tools: RobotTools) -> list[tuple[dict[str, Any], Any]]:
    """The two frame reads (:mod:`registry.frames`): images a model can see, in budget."""
    reader = frames.FrameReader(tools.gateways, tools.task_service)
    budget = (frames.MAX_WIDTH, frames.MAX_HEIGHT, frames.MAX_JPEG_BYTES)
    return [
        (
            _entry(
                "forge.camera.frame",
                "forge_camera_frame",
                "See the newest frame of a running skill's camera (default: its first) as "
                "a JPEG of at most 320x240 px and 12,000 bytes, with its sequence number, "
                "capture time and the arm and gripper state read beside it.",
                CAMERA_FRAME_INPUT,
                "read",
                "low",
                camera_frame_output(*budget),
            ),
            reader.camera_frame,
        ),
        (
            _entry(
                "forge.evidence.frame",
                "forge_evidence_frame",
                "See a task's retained evidence frame (task_id, artifact_id from "
                "forge_task_get) as a JPEG within the same budget, re-hashed first.",
                EVIDENCE_FRAME_INPUT,
                "read",
                "low",
                evidence_frame_output(*budget),
            ),
            reader.evidence_frame,
        ),
    ]


def _naming_cell(name: str, adapter: Adapter, tools: RobotTools, audit: AuditLog) -> ContextAdapter:
    """``adapter`` noting the cell of each call in the audit log before it runs."""

    async def named(arguments: dict[str, Any], context: CallContext) -> Any:
        audit.note_cell(context.request_id, await tools.cell_of(name, arguments))
        return await adapter(arguments)

    return named


def register_robot_tools(service: RegistryService, tools: RobotTools) -> list[str]:
    """Register every ``forge.*`` tool on ``service``; returns the canonical names. The
    audit log (and the approvals asking it) learns to name each call's cell.

    Raises ``ValueError`` when a PAOS tool's agent-facing schema would take a URL.
    """
    audit = service.audit
    audit.name_cells(tools.cell_of)
    entries: list[tuple[dict[str, Any], Adapter]] = []
    for provider, tool in TOOLS.items():
        canonical = "forge." + provider.removeprefix("forge_")
        description, schema = agent_form(provider, tool.description, tool.input_schema)
        entry = _entry(
            canonical,
            provider,
            description,
            schema,
            tool.side_effect,
            tool.risk,
            output_of(provider),
        )
        routed = provider in SKILL_ROUTED
        entries.append((entry, tools.skill_adapter(tool) if routed else tools.agent_adapter(tool)))
    entries += _context_entries(tools)
    names = []
    for entry, adapter in entries:
        named = _naming_cell(entry["name"], _agent_safe(adapter), tools, audit)
        names.append(service.register(entry, named, wants_context=True).name)
    return names
