"""PhyAgentOS 1.1.1's agent tools and doraforge's answer the same calls with the same fields.

One live doraforge Gateway on a real socket; the one agent sequence
(``tests.paos.agent_tool_fields.SEQUENCE``) runs first through PhyAgentOS's own tools
and ``AgentTaskCoordinator`` in its venv, then unchanged through doraforge's tools. For
every answer: the field table names every field PhyAgentOS's answer has, with its type;
doraforge's answer to the same call has every one of those fields with a compatible type
(its own extensions beside them); and both speak PhyAgentOS's status words.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from doraforge.paos.client import ForgeToolClient
from doraforge.paos.store import AgentTaskStore
from doraforge.paos.tasks import TaskService
from tests.gateway.harness import live_mock_gateway
from tests.paos import agent_tool_fields as table
from tests.paths import PROJECT_ROOT
from tests.peers import phyagentos
from tests.support.live_server import LiveServer

pytestmark = pytest.mark.e2e

#: PhyAgentOS's side: its activation manager (a workspace skill, its experience store),
#: its coordinator (unbound, verification off) and its 16 tools, on the live Gateway.
PEER = """
import asyncio, json, pathlib, tempfile
from PhyAgentOS.agent.experience.activation import SkillActivationManager
from PhyAgentOS.agent.experience.store import ExperienceStore
from PhyAgentOS.agent.tools import forge_task, forge_tool_api
from PhyAgentOS.agent.tools.skill_activation import ActivateSkillTool
from PhyAgentOS.config.schema import ForgeConfig
from PhyAgentOS.forge.task import AgentTaskCoordinator
from PhyAgentOS.forge.tool_client import ForgeToolClient
from tests.support.waiting import eventually_async

async def main():
    workspace = pathlib.Path(tempfile.mkdtemp(prefix="paos-peer-"))
    skill = workspace / "skills" / SKILL
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text(DOCUMENT, encoding="utf-8")
    async with ForgeToolClient(URL, timeout_s=10) as client:
        manager = SkillActivationManager(workspace=workspace, store=ExperienceStore(workspace))
        coordinator = AgentTaskCoordinator(
            workspace=workspace, config=ForgeConfig(), client=client,
            activation_manager=manager)
        tools = {t.name: t for t in [
            *forge_tool_api.build_forge_tool_api_tools(client, coordinator=coordinator),
            *forge_task.build_forge_task_tools(coordinator), ActivateSkillTool(manager)]}

        async def call(tool, **arguments):
            return json.loads(await tools[tool].execute(**arguments))

        async def until(poll, what):
            return await eventually_async(poll, within=20.0, what=what, interval=0.02)

        scope = {"SKILL": SKILL}
        exec(SEQUENCE, scope)
        answers = await scope["sequence"](call, until)
    print(json.dumps({"tools": sorted(tools), "answers": answers}))

asyncio.run(main())
"""


@pytest.fixture(scope="module")
def served() -> Iterator[LiveServer]:
    with live_mock_gateway() as (_gateway, server):
        yield server


def _phyagentos(url: str) -> dict[str, Any]:
    constants = {"URL": url, "SKILL": table.SKILL, "DOCUMENT": table.SKILL_DOCUMENT}
    header = "".join(f"{k} = {json.dumps(v)}\n" for k, v in constants.items())
    source = f"{header}SEQUENCE = {json.dumps(table.SEQUENCE)}\n{PEER}"
    seen: dict[str, Any] = phyagentos.run(source, cwd=PROJECT_ROOT)
    return seen


async def _doraforge(url: str, home: Path) -> dict[str, Any]:
    service = TaskService(
        AgentTaskStore(home / "paos.db"),
        lambda gateway_url: ForgeToolClient(gateway_url),
        workspace=home / "workspace",
    )
    candidate = table.installed_candidate(url.rstrip("/"))
    service.activate_skill = lambda name: table.DocumentedActivation(
        candidate, None, table.SKILL_DOCUMENT
    )
    try:
        return await table.run_doraforge(service)
    finally:
        await service.aclose()
        service.store.close()


def _compatible(theirs: set[str], ours: set[str]) -> bool:
    """Every JSON type PhyAgentOS answered at a path is one doraforge answers there too
    (``null`` stands for "not known yet" and is answered by any type)."""
    wanted = theirs - {"null"}
    return wanted <= ours | ({"int"} if "number" in ours else set())


def _under_an_empty_array(path: str, ours: dict[str, set[str]]) -> bool:
    """Whether ``path`` is an item (field) of an array doraforge answered empty: a value
    that differs (no items), not a field that is missing."""
    if "[]" not in path:
        return False
    items = path[: path.rindex("[]") + 2]
    return items not in ours and ours.get(items[:-2]) == {"array"}


def _missing(theirs: dict[str, Any], ours: dict[str, Any], fields: dict[str, str]) -> list[str]:
    """PhyAgentOS's answer fields that doraforge's answer to the same call lacks, or has
    with another type. A field the table marks optional may be absent when doraforge has
    no value for it (as PhyAgentOS leaves out what it has not got)."""
    their_paths, our_paths = table.paths(theirs), table.paths(ours)
    return [
        f"{path}: {sorted(kinds)} vs {sorted(our_paths.get(path, set()))}"
        for path, kinds in their_paths.items()
        if not _compatible(kinds, our_paths.get(path, set()))
        and not _under_an_empty_array(path, our_paths)
        and not (path not in our_paths and fields[path].endswith("?"))
    ]


@pytest.fixture(scope="module")
def both(served: LiveServer, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """PhyAgentOS's run, then doraforge's, of the one sequence on the one live Gateway."""
    peer = _phyagentos(served.url)
    ours = asyncio.run(_doraforge(served.url, tmp_path_factory.mktemp("doraforge")))
    return {"tools": peer["tools"], "theirs": peer["answers"], "ours": ours}


def test_both_sides_answer_the_same_calls_with_the_same_fields(both: dict[str, Any]) -> None:
    theirs, ours = both["theirs"], both["ours"]
    assert set(both["tools"]) == set(table.ANSWERS)
    assert set(theirs) == set(ours)
    for key, answer in theirs.items():
        tool, fields = table.tool_of(key), table.fields_of(key)
        assert table.unlisted(answer, fields) == [], f"{key}: PhyAgentOS answers fields unlisted"
        assert table.problems(answer, fields) == [], f"{key}: PhyAgentOS"
        assert table.problems(ours[key], fields) == [], f"{key}: doraforge"
        assert _missing(answer, ours[key], fields) == [], key
        assert table.status_words(tool, answer) == table.status_words(tool, ours[key]) == []


def test_both_sides_serve_the_same_skill_document_and_reach_the_same_outcomes(
    both: dict[str, Any],
) -> None:
    theirs, ours = both["theirs"], both["ours"]
    assert theirs["activate_skill"]["skill"] == ours["activate_skill"]["skill"]
    for key in ("forge_tool_query/error", "forge_tool_action_status/error"):
        assert theirs[key]["ok"] is ours[key]["ok"] is False, key
    unknown = "forge_tool_query/error", ("error", "status_code")
    assert _at(theirs[unknown[0]], unknown[1]) == _at(ours[unknown[0]], unknown[1]) == 404
    digest = "activation", "content_sha256"
    assert _at(theirs["activate_skill"], digest) == _at(ours["activate_skill"], digest)
    for key, path in (
        ("forge_tool_action_result/available", ("data", "phase")),
        ("forge_tool_action_result/available", ("data", "result", "status")),
        ("forge_tool_session_status/terminal", ("data", "phase")),
        ("forge_task_finalize", ("data", "status")),
        ("forge_task_cancel", ("data", "status")),
    ):
        assert _at(theirs[key], path) == _at(ours[key], path), (key, path)


def _at(answer: Any, path: tuple[str, ...]) -> Any:
    for step in path:
        answer = answer[step]
    return answer
