"""One agent, as data, run unchanged through PhyAgentOS's agent tools and doraforge's.

:data:`PICK_PLACE` is what an agent written for PhyAgentOS 1.1.1 calls to pick the cube
and place it in the zone: ``activate_skill``, ``forge_task_create {task_description,
activation_id, verification}``, ``forge_tool_context``, a bound ``forge_tool_query`` of
the scene, then per planned move ``forge_tool_start_action``, ``forge_tool_action_status``
and ``forge_tool_action_result`` (polled until ``available``), ``forge_task_finalize`` and
``forge_task_get``, every argument in PhyAgentOS's shapes.

A step is ``{"call": tool, "arguments": {...}}``, optionally with ``"keep": {name: path}``
(values read from its answer for later steps), ``"until": {path: value}`` (the call is
repeated, bounded, until the answer shows it) and ``"within_s"``. An argument
``{"$": "name.path"}`` is a placeholder filled from what earlier steps kept. One step
``{"plan": planner, "from": name, "each": name, "do": [...]}`` runs its ``do`` steps once
per move the planner makes from a kept value (the scene): the moves are the agent's
reasoning (:func:`doraforge.cli.demos.pick_place.plan_steps`), the calls are the script's.

Paths read an answer the way PhyAgentOS's coordinator does (``_response_data``): in its
``data`` object when it has one, else in the answer itself, so only fields both sides
document are relied on (``activation.activation_id``, ``task_id``, ``invocation_id``,
``response.result.outputs``, ``status``).
"""

from __future__ import annotations

import asyncio
import copy
import json
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from doraforge.cli.demos.pick_place import plan_steps
from doraforge.paos.agent_tools import TOOLS
from doraforge.paos.tasks import TaskService
from tests.peers import phyagentos
from tests.support.waiting import eventually_async

type Answer = dict[str, Any]
type ToolCall = Callable[[str, dict[str, Any]], Awaitable[Answer]]
type Planner = Callable[[Any], list[dict[str, Any]]]

SKILL = "pick-place"
STEP_TIMEOUT_S = 90.0
#: Between reads of a pending result: PhyAgentOS's own default (``ForgeConfig.poll_interval_s``).
POLL_INTERVAL_S = 0.5

TASK = {"$": "task_id"}
OWNED = {"task_id": TASK, "invocation_id": {"$": "invocation_id"}}
#: PhyAgentOS's TaskVerificationContract. ``off``: PhyAgentOS judges any other mode with
#: its LLM verifier only, and this run has no model (the outcome is read from the scene).
VERIFICATION = {
    "mode": "off",
    "goal": "the red cube rests inside the green target zone",
    "success_criteria": ["cube_in_zone"],
    "evidence_policy": {
        "required_sources": ["scene"],
        "required_kinds": ["rgb_image", "robot_state"],
    },
}

PICK_PLACE: list[dict[str, Any]] = [
    {
        "call": "activate_skill",
        "arguments": {"name": SKILL},
        "keep": {"activation_id": "activation.activation_id"},
    },
    {
        "call": "forge_task_create",
        "arguments": {
            "task_description": "Pick the red cube up and place it in the green target zone.",
            "activation_id": {"$": "activation_id"},
            "verification": VERIFICATION,
        },
        "keep": {"task_id": "task_id"},
    },
    {"call": "forge_tool_context", "arguments": {"tool_id": "world.scene_state"}},
    {
        "call": "forge_tool_query",
        "arguments": {"task_id": TASK, "tool_id": "world.scene_state", "arguments": {}},
        "keep": {"scene": "response.result.outputs"},
    },
    {
        "plan": "pick_place",
        "from": "scene",
        "each": "move",
        "do": [
            {
                "call": "forge_tool_start_action",
                "arguments": {
                    "task_id": TASK,
                    "tool_id": {"$": "move.tool_id"},
                    "arguments": {"$": "move.arguments"},
                },
                "keep": {"invocation_id": "invocation_id"},
            },
            {"call": "forge_tool_action_status", "arguments": OWNED},
            {
                "call": "forge_tool_action_result",
                "arguments": OWNED,
                "until": {"status": "available"},
                "within_s": STEP_TIMEOUT_S,
            },
        ],
    },
    {"call": "forge_task_finalize", "arguments": {"task_id": TASK}},
    {"call": "forge_task_get", "arguments": {"task_id": TASK}, "keep": {"task": ""}},
]


def pick_place_moves(scene: Any) -> list[dict[str, Any]]:
    """The moves for this scene, as ``{label, tool_id, arguments}``."""
    return [
        {"label": label, "tool_id": tool_id, "arguments": arguments}
        for label, tool_id, arguments in plan_steps(scene, say=lambda _line: None)
    ]


PLANNERS: dict[str, Planner] = {"pick_place": pick_place_moves}


class ScriptRefused(AssertionError):
    """A tool refused a call of the script (its shape, or what the call asked for)."""


@dataclass
class Transcript:
    """Every call the script made (its arguments, answer and duration), and what it kept."""

    side: str
    calls: list[dict[str, Any]] = field(default_factory=list)
    kept: dict[str, Any] = field(default_factory=dict)

    def names(self) -> list[str]:
        """The tool names called, in order (a polled call once per poll)."""
        return [call["call"] for call in self.calls]


def payload(answer: Answer) -> Any:
    """Where an answer's fields are read: its ``data`` object, else the answer itself."""
    data = answer.get("data")
    return data if isinstance(data, dict) else answer


def read(value: Any, path: str) -> Any:
    """``value`` at the dotted ``path`` (``""``: all of it); ``KeyError`` names the path."""
    for part in filter(None, path.split(".")):
        if not isinstance(value, Mapping) or part not in value:
            raise KeyError(f"{path!r}: no {part!r}")
        value = value[part]
    return value


def fill(arguments: Any, kept: Mapping[str, Any]) -> Any:
    """``arguments`` with every ``{"$": "name.path"}`` replaced by the kept value."""
    if isinstance(arguments, dict):
        if set(arguments) == {"$"}:
            name, _, rest = arguments["$"].partition(".")
            return copy.deepcopy(read(kept[name], rest))
        return {key: fill(value, kept) for key, value in arguments.items()}
    if isinstance(arguments, list):
        return [fill(value, kept) for value in arguments]
    return arguments


async def run_script(
    script: list[dict[str, Any]],
    call: ToolCall,
    *,
    side: str,
    planners: Mapping[str, Planner] = PLANNERS,
) -> Transcript:
    """Run ``script`` through ``call``; raise :class:`ScriptRefused` at the first answer
    that is not ``ok: true`` (it names the call, its arguments and the answer)."""
    transcript = Transcript(side)
    await _steps(script, call, transcript, planners)
    return transcript


async def _steps(
    steps: list[dict[str, Any]],
    call: ToolCall,
    transcript: Transcript,
    planners: Mapping[str, Planner],
) -> None:
    for step in steps:
        if "plan" in step:
            for move in planners[step["plan"]](transcript.kept[step["from"]]):
                transcript.kept[step["each"]] = move
                await _steps(step["do"], call, transcript, planners)
        else:
            await _step(step, call, transcript)


async def _step(step: dict[str, Any], call: ToolCall, transcript: Transcript) -> None:
    arguments = fill(step["arguments"], transcript.kept)

    async def answered() -> Answer | None:
        answer = await _call(step["call"], arguments, call, transcript)
        done = all(read(payload(answer), p) == v for p, v in step.get("until", {}).items())
        return answer if done else None

    answer: Answer | None = await eventually_async(
        answered,
        within=step.get("within_s", STEP_TIMEOUT_S),
        what=f"{transcript.side}: {step['call']} to answer {step.get('until')}",
        interval=POLL_INTERVAL_S,
    )
    assert answer is not None  # eventually_async returns only a truthy value
    for name, path in step.get("keep", {}).items():
        transcript.kept[name] = read(payload(answer), path)


async def _call(name: str, arguments: dict[str, Any], call: ToolCall, t: Transcript) -> Answer:
    began = time.monotonic()
    answer = await call(name, copy.deepcopy(arguments))
    seconds = round(time.monotonic() - began, 3)
    t.calls.append({"call": name, "arguments": arguments, "answer": answer, "seconds": seconds})
    if answer.get("ok") is not True:
        raise ScriptRefused(
            f"{t.side} refused {name} {json.dumps(arguments)}: {json.dumps(answer)[:2000]}"
        )
    return answer


def doraforge_tools(service: TaskService) -> ToolCall:
    """doraforge's agent tools (:data:`doraforge.paos.agent_tools.TOOLS`) on ``service``."""

    async def call(name: str, arguments: dict[str, Any]) -> Answer:
        return await TOOLS[name](service, arguments)

    return call


def phyagentos_tools(peer: phyagentos.Session) -> ToolCall:
    """PhyAgentOS's agent tools in the peer ``peer`` runs (:data:`PHYAGENTOS_AGENT`).

    PhyAgentOS's ``ToolRegistry`` answers a refused shape or a raised error with a line
    starting ``Error``, not JSON: that reads as ``ok: false`` with the line as message.
    """

    async def call(name: str, arguments: dict[str, Any]) -> Answer:
        reply = await asyncio.to_thread(
            peer.request, {"tool": name, "arguments": arguments}, STEP_TIMEOUT_S
        )
        text: str = reply["text"]
        try:
            answer = json.loads(text)
        except ValueError:
            return {"ok": False, "error": {"type": "phyagentos_registry", "message": text}}
        return answer if isinstance(answer, dict) else {"ok": False, "error": {"answer": text}}

    return call


#: Runs in the PhyAgentOS venv (a :class:`tests.peers.phyagentos.Session` whose home is
#: PAOS_HOME). Its first request, ``{"archive", "image_sources", "user_message"}``, comes
#: once the Gateway runs (the peer imports PhyAgentOS meanwhile): it installs the bundle
#: with PhyAgentOS's SkillInstaller, records the manifest's ``gateway_url`` as a ready
#: runtime and wires the agent's Forge components as PhyAgentOS's CLI and AgentLoop do.
#: Every later request ``{"tool", "arguments"}`` runs through PhyAgentOS's ToolRegistry.
PHYAGENTOS_AGENT = """
import asyncio, json, os, sys
from pathlib import Path
from PhyAgentOS.config.loader import set_config_path

HOME = Path(os.environ["PAOS_HOME"])
set_config_path(HOME / "config.json")  # skills, runtime state and logs live under HOME

from PhyAgentOS.agent.experience.activation import SkillActivationManager
from PhyAgentOS.agent.experience.store import ExperienceStore
from PhyAgentOS.agent.skills import SkillsLoader
from PhyAgentOS.agent.tools.forge_task import build_forge_task_tools
from PhyAgentOS.agent.tools.forge_tool_api import build_forge_tool_api_tools
from PhyAgentOS.agent.tools.registry import ToolRegistry
from PhyAgentOS.agent.tools.skill_activation import ActivateSkillTool
from PhyAgentOS.config.paths import get_skill_bundle_root
from PhyAgentOS.config.schema import ForgeConfig, ForgeEvidenceConfig
from PhyAgentOS.forge.binding import ForgeSkillBindingResolver
from PhyAgentOS.forge.task import AgentTaskCoordinator
from PhyAgentOS.skill_runtime.catalog import SkillCatalog
from PhyAgentOS.skill_runtime.installer import SkillInstaller
from PhyAgentOS.skill_runtime.integration import (
    ActiveRuntimeRegistry, DynamicForgeToolClient, DynamicRuntimeSet,
)
from PhyAgentOS.skill_runtime.manager import RuntimeManager
from PhyAgentOS.skill_runtime.state import RuntimeState, RuntimeStateStore, utc_now

SESSION_KEY = "cli:direct"
WORKSPACE = HOME / "workspace"


def install_and_record_running(archive):
    # PhyAgentOS's RuntimeManager.start would also launch the flow, on the machine-wide
    # `dora up` coordinator; here the flow already runs (a private `dora run`), so what
    # start does once the flow is up is done as it does it: the readiness checks of the
    # manifest's gateway_url, then the running state with the Gateway's identity.
    catalog, store = SkillCatalog(), RuntimeStateStore()
    installed = SkillInstaller(get_skill_bundle_root(), state_store=store).install(archive)
    manifest = catalog.get(installed.name)
    manager = RuntimeManager(catalog=catalog, state_store=store)
    snapshot = manager._gateway_snapshot(manifest)
    ready = manager._tool_context_readiness(manifest, manifest.tools_for_profile("sim"))
    data = (snapshot or {}).get("data") or {}
    identity = data.get("gateway_identity") or data.get("gateway_id")
    store.save(RuntimeState(
        skill_name=manifest.name, profile="sim", status="running",
        flow_name=RuntimeManager.flow_name(manifest.name, "sim"),
        gateway_url=manifest.gateway_url, gateway_identity=identity, started_at=utc_now(),
    ))
    return catalog, store, {
        "skill": manifest.name, "gateway_url": manifest.gateway_url,
        "gateway_identity": identity, "tools_ready": ready, "workspace": str(WORKSPACE),
    }


def agent_tools(catalog, store, image_sources, user_message):
    # PhyAgentOS.cli.commands._make_forge_components, then AgentLoop's tool registration
    # and its per-message context (session key, begin_turn).
    registry = ActiveRuntimeRegistry(catalog=catalog, state_store=store, auto_refresh=True)
    client = DynamicForgeToolClient(registry)
    resolver = ForgeSkillBindingResolver(registry, skills_loader=SkillsLoader(WORKSPACE))
    evidence = ForgeEvidenceConfig(required_image_sources=image_sources)
    coordinator = AgentTaskCoordinator(
        workspace=WORKSPACE,
        config=ForgeConfig(evidence=evidence),
        client=client,
        binding_resolver=resolver,
        runtime_invocation_ids=DynamicRuntimeSet(registry, "invocation_ids"),
        runtime_session_ids=DynamicRuntimeSet(registry, "session_ids"),
        runtime_task_binding_ids=DynamicRuntimeSet(registry, "task_binding_ids"),
    )
    activation = SkillActivationManager(
        workspace=WORKSPACE, store=ExperienceStore(WORKSPACE),
        runtime_availability_provider=registry.is_available, binding_resolver=resolver,
    )
    coordinator.set_activation_manager(activation)
    tools = ToolRegistry(policy=coordinator.interaction)
    tools.register(ActivateSkillTool(activation))
    for tool in build_forge_task_tools(coordinator):
        tools.register(tool)
    for tool in build_forge_tool_api_tools(client, coordinator=coordinator):
        tools.register(tool)
    for name in ("forge_task_create", "activate_skill"):
        tools.get(name).set_context(SESSION_KEY)
    activation.begin_turn(SESSION_KEY, user_message)
    return tools, client


async def main():
    loop = asyncio.get_running_loop()
    reply({"imported": True})
    request = json.loads(await loop.run_in_executor(None, sys.stdin.readline))
    catalog, store, setup = install_and_record_running(Path(request["archive"]))
    tools, client = agent_tools(
        catalog, store, request["image_sources"], request["user_message"]
    )
    setup["tools"] = sorted(tools.tool_names)
    reply(setup)
    try:
        while line := await loop.run_in_executor(None, sys.stdin.readline):
            request = json.loads(line)
            reply({"text": await tools.execute(request["tool"], request["arguments"])})
    finally:
        await client.close()

asyncio.run(main())
"""
