"""``task run`` reads the scene first: a goal that already holds is refused before a task
is created or anything moves, naming the command that resets the scene."""

from __future__ import annotations

from typing import Any

import pytest

from doraforge.cli.demos.agent import AgentFailure, refuse_if_solved
from doraforge.paos import agent_tools

pytestmark = pytest.mark.anyio

URL = "http://127.0.0.1:19301"


def _scene(monkeypatch: pytest.MonkeyPatch, answer: dict[str, Any]) -> list[dict[str, Any]]:
    asked: list[dict[str, Any]] = []

    async def query(_service: Any, arguments: dict[str, Any]) -> dict[str, Any]:
        asked.append(arguments)
        return answer

    monkeypatch.setitem(agent_tools.TOOLS, "forge_tool_query", query)
    return asked


def _outputs(placed: bool) -> dict[str, Any]:
    predicates = {"cube_in_target_and_resting": placed, "cube_lifted": False}
    result = {"status": "succeeded", "outputs": {"predicates": predicates}}
    return {"ok": True, "data": {"response": {"result": result}}}


async def test_a_solved_scene_is_refused_naming_world_reset(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    asked = _scene(monkeypatch, _outputs(placed=True))
    with pytest.raises(AgentFailure) as refused:
        await refuse_if_solved(object(), "pick-place", URL)  # type: ignore[arg-type]
    assert refused.value.code == "TASK_GOAL_ALREADY_MET"
    assert refused.value.message.endswith(
        "reset it with `doraforge tools call world.reset --skill pick-place`, then run again"
    )
    # A diagnostic Query on the running Gateway: no task, no record.
    assert asked == [{"gateway_url": URL, "tool_id": "world.scene_state"}]


async def test_an_unsolved_scene_or_one_without_the_query_lets_the_run_go_on(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _scene(monkeypatch, _outputs(placed=False))
    await refuse_if_solved(object(), "pick-place", URL)  # type: ignore[arg-type]
    _scene(monkeypatch, {"ok": False, "error": {"code": "FORGE_TOOL_NOT_FOUND", "message": ""}})
    await refuse_if_solved(object(), "pick-place", URL)  # type: ignore[arg-type]
