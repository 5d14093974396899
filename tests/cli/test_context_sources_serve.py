"""A real ``doraforge serve`` answers the MCP context tools from this home's scopes: the
console's pages, the installed skill, the recorded tasks, with no path of the home in
any answer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from doraforge.paos.home import PaosHome
from tests.registry.context.scope_support import SKILL, install_skill, recorded_tasks
from tests.support.live_server import serve_process

ACCEPT = "application/json, text/event-stream"


def _call(base_url: str, name: str, arguments: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """One ``tools/call`` over MCP: the structured result and the raw answer text."""
    message = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }
    headers = {"accept": ACCEPT, "content-type": "application/json"}
    response = httpx.post(f"{base_url}/mcp", json=message, headers=headers, timeout=20)
    assert response.status_code == 200, response.text
    result = response.json()["result"]
    assert result.get("isError") is not True, result
    return result["structuredContent"], response.text


def test_serve_answers_the_context_tools_from_this_homes_scopes(tmp_path: Path) -> None:
    home = PaosHome(tmp_path / "serve" / "home")
    install_skill(home, tmp_path)
    recorded_tasks(home, 1)
    scopes = ("--context-scope", "navigation", "--context-scope", "skills")
    with serve_process(tmp_path / "serve", "--mcp", *scopes, "--context-scope", "tasks") as serve:
        camera, raw_camera = _call(serve.base_url, "resolve_navigation", {"query": "camera"})
        skills, raw_skills = _call(serve.base_url, "list_context", {"scope": "skills"})
        tasks, raw_tasks = _call(serve.base_url, "list_context", {"scope": "tasks"})
    assert camera["item"]["route"] == "/console/#/cell"
    assert [item["label"] for item in skills["items"]] == [f"{SKILL} 1.0.0"]
    assert skills["sourceStatus"] == "fresh"
    assert tasks["items"][0]["metadata"]["verdict"] == "success"
    for raw in (raw_camera, raw_skills, raw_tasks):
        assert str(tmp_path) not in raw
