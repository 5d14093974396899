"""A scripted agent: the pick-and-place as a governed AgentTask, through the agent tools only.

It calls exactly what an LLM agent would call — ``forge_task_create``,
``forge_tool_query``, ``forge_tool_start_action``, ``forge_tool_action_result``,
``forge_task_finalize`` — and reads nothing else.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from doraforge.cli.demos.pick_place import plan_steps
from doraforge.paos.agent_tools import TOOLS
from doraforge.paos.errors import PaosError
from doraforge.paos.tasks import TaskService

type Say = Callable[[str], None]

STEP_TIMEOUT_S = 90.0
CANCEL_SETTLE_S = 30.0  # longer than cancel_task's own settle wait


class AgentFailure(PaosError):
    """An agent tool answered ``ok: false``: its ``code`` and ``details``, and a message
    naming the tool (a PAOS error, so the CLI prints it as one line, never a traceback)."""


async def call(service: TaskService, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """Invoke one agent tool; raise :class:`AgentFailure` on ``ok: false``."""
    answer = await TOOLS[tool](service, arguments)
    if not answer["ok"]:
        error = answer["error"]
        raise AgentFailure(
            error["code"],
            f"{tool}: {error['message']}",
            retryable=bool(error.get("retryable", False)),
            details=error.get("details"),
        )
    data = answer["data"]
    if not isinstance(data, dict):  # every agent tool answers an object
        raise AgentFailure("PAOS_AGENT_TOOL_ANSWER", f"{tool}: answered {type(data).__name__}")
    return data


#: The world's predicate that says the pick-and-place's goal already holds.
GOAL_PREDICATE = "cube_in_target_and_resting"


async def refuse_if_solved(service: TaskService, skill: str, gateway_url: str) -> None:
    """Raise ``TASK_GOAL_ALREADY_MET`` when the running ``skill``'s scene (a diagnostic
    ``world.scene_state`` Query at ``gateway_url``, recording nothing) already satisfies
    the goal: a run would move the arm for nothing and fail its own verification. A
    scene without that predicate or tool is not judged here."""
    query = {"gateway_url": gateway_url, "tool_id": "world.scene_state"}
    answer = await TOOLS["forge_tool_query"](service, query)
    if not answer["ok"]:
        return  # no such Query here: the task itself reports what is wrong
    outputs = (((answer["data"] or {}).get("response") or {}).get("result") or {}).get("outputs")
    predicates = outputs.get("predicates") if isinstance(outputs, dict) else None
    if isinstance(predicates, dict) and predicates.get(GOAL_PREDICATE) is True:
        raise AgentFailure(
            "TASK_GOAL_ALREADY_MET",
            f"the scene of {skill!r} already satisfies {GOAL_PREDICATE} (the cube rests in "
            "the target zone), so a run has nothing to do; reset it with "
            f"`doraforge tools call world.reset --skill {skill}`, then run again",
            details={"skill": skill, "predicate": GOAL_PREDICATE},
        )


async def run_pick_place(
    service: TaskService,
    skill: str,
    *,
    say: Say = print,
    opened: Callable[[str], None] = lambda task_id: None,
) -> dict[str, Any]:
    """Create the task for ``skill``, pick and place, finalize; return the finalized task.

    ``opened`` is told the task's id the moment it exists (whoever stops this run early
    must end that task)."""
    created = await call(service, "forge_task_create", {"skill": skill})
    task_id = created["task"]["task_id"]
    opened(task_id)
    say(f"   task {task_id} bound to {skill} {created['binding']['version']}")
    scene = await call(
        service, "forge_tool_query", {"task_id": task_id, "tool_id": "world.scene_state"}
    )
    for label, tool_id, arguments in plan_steps(scene["response"]["result"]["outputs"], say=say):
        began = time.monotonic()
        try:
            record = await _run_action(service, task_id, tool_id, arguments)
        except AgentFailure as exc:
            if exc.code != "PAOS_TASK_STATE":
                raise
            say(f"   {label:24s} {tool_id:18s} not started: the task is no longer executing")
            break  # cancelled between two steps: the task says how it ended
        outputs = (record.get("result") or {}).get("outputs", {})
        say(f"   {label:24s} {tool_id:18s} {record['state']:9s} {time.monotonic() - began:4.1f} s")
        if record["state"] != "completed":
            say(f"   {tool_id} {record['state']}: {_why(record)}")
            break
        if tool_id == "gripper.grasp" and not outputs.get("holding"):
            say("   the gripper closed on nothing; finalizing as is")
            break
    current = await call(service, "forge_task_get", {"task_id": task_id})
    if current["task"]["state"] != "executing":
        # Cancelled meanwhile (`doraforge task cancel`): nothing to finalize; the task ends
        # once the canceller has settled its work.
        return await _ended(service, task_id, current)
    return await call(service, "forge_task_finalize", {"task_id": task_id})


async def _ended(service: TaskService, task_id: str, current: dict[str, Any]) -> dict[str, Any]:
    """The task once it has left ``cancelling`` (bounded: as it stands after the wait)."""
    deadline = time.monotonic() + CANCEL_SETTLE_S
    while current["task"]["state"] == "cancelling" and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
        current = await call(service, "forge_task_get", {"task_id": task_id})
    return current


def _why(record: dict[str, Any]) -> str:
    """The error a step ended with, as ``CODE: message`` (the Gateway's result, else PAOS's)."""
    error = (record.get("result") or {}).get("error") or record.get("error") or {}
    if not isinstance(error, dict) or not error:
        return "no error was reported"
    return f"{error.get('code', '?')}: {error.get('message', '')}"


async def _run_action(
    service: TaskService, task_id: str, tool_id: str, arguments: dict[str, Any]
) -> dict[str, Any]:
    started = await call(
        service,
        "forge_tool_start_action",
        {"task_id": task_id, "tool_id": tool_id, "arguments": arguments},
    )
    query = {"task_id": task_id, "record_id": started["record_id"]}
    async with asyncio.timeout(STEP_TIMEOUT_S):
        while True:
            answer = await call(service, "forge_tool_action_result", query)
            if answer["status"] == "available":
                record: dict[str, Any] = answer["record"]  # the record's public document
                return record
            await asyncio.sleep(0.05)
