"""Which cell a robot-tool call concerns: the skill, its runtime instance, and the robot.

One registry fronts several cells (one running skill each, with its own Gateway). Every
approval an operator decides and every audit record of a ``forge.*`` call names the cell
it concerns, so "approve arm.move_to_pose" can never be read for the wrong robot. The cell
of a call comes from what the call names, never from a guess:

* ``task_id``: the task's frozen binding (skill and the runtime instance it froze);
* ``skill`` (or ``activate_skill``'s ``name``): that skill's recorded runtime;
* ``activation_id``: the skill of that activation;
* with ``tool_id`` as well, the robot of that tool (its ToolSpec's
  ``robot_frame_profile.robot_id``), read once per runtime instance and tool.

A call naming none of these concerns no single cell (``None``); one that needs a cell but
could mean several is refused by the tool itself (``SKILL_AMBIGUOUS``,
``PAOS_CELL_AMBIGUOUS``). Naming a cell never fails a call: what cannot be read is left
out (``None`` fields), and the call's own answer says what went wrong.
"""

from __future__ import annotations

import logging
import re
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from doraforge.paos.errors import PaosError
from doraforge.paos.home import PaosHome

log = logging.getLogger(__name__)

#: How many (runtime instance, tool) robots are remembered.
_MAX_ROBOTS = 1024


@dataclass(frozen=True)
class Cell:
    """One cell: a running skill's runtime, and the robot a tool of it drives."""

    skill: str
    runtime_instance_id: str | None
    robot: str | None = None

    def public(self) -> dict[str, str | None]:
        """The wire form audit records and approvals carry."""
        return {
            "skill": self.skill,
            "runtimeInstanceId": self.runtime_instance_id,
            "robot": self.robot,
        }


def running_cells(home: PaosHome) -> list[Cell]:
    """The cells of every skill recorded ``running`` in ``home``, by name."""
    from doraforge.skill_runtime import all_states

    return [
        Cell(state.name, state.runtime_instance_id)
        for state in all_states(home.runtime_dir)
        if state.state == "running"
    ]


def robot_of(context: Mapping[str, Any]) -> str | None:
    """The robot a tool's live context (or ToolSpec) names, if it names one."""
    profile = context.get("robot_frame_profile")
    robot = profile.get("robot_id") if isinstance(profile, Mapping) else None
    return robot if isinstance(robot, str) and robot else None


class CellNames:
    """Names the cell of a call from its arguments (see the module docstring).

    ``task_service`` is the registry's one TaskService (its store and shared clients);
    ``gateway_url`` resolves a skill's running Gateway (``SkillGateways.url``).
    """

    def __init__(
        self,
        home: PaosHome,
        task_service: Callable[[], Any],
        gateway_url: Callable[[str], Any],
    ) -> None:
        self._home = home
        self._task_service = task_service
        self._gateway_url = gateway_url
        self._robots: OrderedDict[tuple[str, str], str | None] = OrderedDict()

    async def of_call(self, tool: str, arguments: Mapping[str, Any]) -> Cell | None:
        """The cell a call of ``tool`` with ``arguments`` concerns, or ``None``."""
        if not tool.startswith("forge."):
            return None
        try:
            cell, gateway_url = await self._cell(arguments)
        except Exception as exc:  # naming is best effort; the call reports its own failure
            log.debug("no cell for %s: %r", tool, exc)
            return None
        tool_id = arguments.get("tool_id")
        if cell is None or not isinstance(tool_id, str):
            return cell
        robot = await self._robot(cell, tool_id, gateway_url)
        return Cell(cell.skill, cell.runtime_instance_id, robot)

    async def _cell(self, arguments: Mapping[str, Any]) -> tuple[Cell | None, str | None]:
        task_id = arguments.get("task_id")
        if isinstance(task_id, str):
            store = self._task_service().store
            binding = store.binding(store.task(task_id).binding_id)  # as stored, even if odd
            instance = binding.get("runtime_instance")
            return Cell(str(binding.get("skill")), instance), binding.get("gateway_url")
        skill = arguments.get("skill") or arguments.get("name")
        if isinstance(skill, str):
            return self._of_skill(skill), None
        activation_id = arguments.get("activation_id")
        if isinstance(activation_id, str):
            from doraforge.paos.phyagentos_shapes import activations

            candidate = activations(self._task_service()).primary(activation_id).skill.candidate
            return Cell(candidate.skill, candidate.runtime_instance), candidate.gateway_url
        return None, None

    def _of_skill(self, skill: str) -> Cell:
        """``skill``'s cell as its own state file records it (one file, not the home's
        every state: this runs on every call)."""
        from doraforge.skill_runtime.manifest import NAME_PATTERN
        from doraforge.skill_runtime.runtime_state import read_state

        if not re.fullmatch(NAME_PATTERN, skill):
            return Cell(skill, None)
        try:
            state = read_state(self._home.runtime_dir, skill)
        except (PaosError, OSError):
            return Cell(skill, None)
        if state is None or state.state != "running" or state.name != skill:
            return Cell(skill, None)
        return Cell(skill, state.runtime_instance_id)

    async def _robot(self, cell: Cell, tool_id: str, gateway_url: str | None) -> str | None:
        if cell.runtime_instance_id is None:
            return None
        key = (cell.runtime_instance_id, tool_id)
        if key in self._robots:
            return self._robots[key]
        try:
            url = gateway_url or await self._gateway_url(cell.skill)
            context = await self._task_service().client(url).context(tool_id)
        except Exception as exc:  # naming is best effort; the call reports its own failure
            log.debug("no robot for %s on %s: %r", tool_id, cell.skill, exc)
            return None
        robot = self._robots[key] = robot_of(context)
        while len(self._robots) > _MAX_ROBOTS:
            self._robots.popitem(last=False)
        return robot
