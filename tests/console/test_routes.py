"""The console's JSON routes over a real home, SQLite store and socket: each needs the
token, the Origin and Host checks apply, and bad input is a structured 4xx."""

from __future__ import annotations

import hashlib
import io
import socket
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import cv2
import httpx
import numpy as np
import pytest

from doraforge.console import ROUTES
from doraforge.paos.evidence import evidence_path
from doraforge.paos.home import PaosHome
from doraforge.paos.store import AgentTaskStore
from doraforge.registry.settings import ServerSettings
from doraforge.skill_runtime.archive import pack
from doraforge.skill_runtime.installer import Installer
from tests.console.support import TOKEN, serving_console
from tests.paths import PROJECT_ROOT

AUTH = {"Authorization": f"Bearer {TOKEN}"}
SKILL = "pick-place"
TASK = "task_console0001"


def _frame_png(value: int) -> bytes:
    ok, encoded = cv2.imencode(".png", np.full((8, 8, 3), value, dtype=np.uint8))
    assert ok
    return bytes(encoded)


def _artifact(home: PaosHome, artifact_id: str, phase: str, value: int) -> dict[str, Any]:
    data = _frame_png(value)
    relative = evidence_path(TASK, artifact_id, "image/png")
    target = home.workspace / relative
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)
    return {
        "artifact_id": artifact_id,
        "task_id": TASK,
        "revision_id": "rev_1",
        "record_id": None,
        "source": "scene",
        "phase": phase,
        "seq": value,
        "captured_at_ns": 1_000 + value,
        "media_type": "image/png",
        "size": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
        "path": relative,
        "error": None,
    }


def _seed_task(home: PaosHome) -> None:
    store = AgentTaskStore(home.store_path)
    try:
        store.put_binding("bind_1", "0" * 64, {"skill": SKILL})
        store.create_task(
            task_id=TASK, revision_id="rev_1", binding_id="bind_1", goal="place", contract={}
        )
        for artifact_id, phase, value in (("art_b", "before", 10), ("art_a", "after", 200)):
            store.add_evidence(_artifact(home, artifact_id, phase, value))
        store.add_evidence(
            {
                "artifact_id": "art_x",
                "task_id": TASK,
                "revision_id": "rev_1",
                "source": "wrist",
                "phase": "after",
                "error": {"code": "EVIDENCE_TIMEOUT", "message": "late"},
            }
        )
    finally:
        store.close()


def _install(home: PaosHome, tmp: Path) -> None:
    packed = pack(PROJECT_ROOT / "skills" / SKILL, tmp / f"{SKILL}.tar.gz")
    Installer(home).install(str(packed.path), yes=True)


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    tmp = tmp_path_factory.mktemp("console")
    home = PaosHome(tmp / "home")
    _install(home, tmp)
    _seed_task(home)
    settings = ServerSettings(token=TOKEN, grants=frozenset({"robot.read"}))
    with serving_console(home, settings) as url, httpx.Client(base_url=url) as client:
        yield client


def _concrete(path: str) -> str:
    return (
        path.replace("{name}", SKILL)
        .replace("{skill}", SKILL)
        .replace("{source}", "scene")
        .replace("{tool_id}", "arm.home")
        .replace("{invocation_id}", "inv_1")
        .replace("{task_id}", TASK)
        .replace("{artifact_id}", "art_b")
    )


ROUTE_CASES = [
    (method, _concrete(route.path))  # type: ignore[attr-defined]
    for route in ROUTES
    for method in sorted(route.methods)  # type: ignore[attr-defined]
]


@pytest.mark.parametrize(("method", "path"), ROUTE_CASES)
def test_every_console_route_needs_the_token(base: httpx.Client, method: str, path: str) -> None:
    answer = base.request(method, path, json={} if method == "POST" else None)
    assert answer.status_code == 401
    assert answer.json()["error"]["code"] == "AUTH_REQUIRED"


@pytest.mark.parametrize(("method", "path"), ROUTE_CASES)
def test_every_console_route_refuses_a_foreign_origin(
    base: httpx.Client, method: str, path: str
) -> None:
    headers = {**AUTH, "Origin": "http://evil.example"}
    answer = base.request(method, path, headers=headers)
    assert answer.status_code == 403
    assert answer.json()["error"]["code"] == "ORIGIN_NOT_ALLOWED"


def test_the_session_says_a_token_is_required(base: httpx.Client) -> None:
    answer = base.get("/console/api/session", headers=AUTH)
    assert answer.status_code == 200
    assert answer.json()["token_required"] is True


def test_skills_list_the_installed_skill_never_started(base: httpx.Client) -> None:
    skills = base.get("/console/api/skills", headers=AUTH).json()["skills"]
    assert [(s["name"], s["version"], s["runtime"]) for s in skills] == [(SKILL, "1.0.0", None)]
    # Not running: no Gateway address (the manifest's default is not where anything runs).
    assert skills[0]["gateway_url"] is None


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "code"),
    [
        ("GET", "/console/api/skills?x=1", None, 400, "CONSOLE_INVALID_QUERY"),
        ("GET", f"/console/api/skills/{SKILL}/logs?lines=0", None, 400, "CONSOLE_INVALID_QUERY"),
        ("GET", f"/console/api/skills/{SKILL}/logs?lines=abc", None, 400, "CONSOLE_INVALID_QUERY"),
        ("GET", f"/console/api/skills/{SKILL}/logs", None, 409, "SKILL_NOT_RUNNING"),
        (
            "POST",
            f"/console/api/skills/{SKILL}/stop",
            {"force": "yes"},
            400,
            "CONSOLE_INVALID_BODY",
        ),
        ("POST", f"/console/api/skills/{SKILL}/stop", {}, 409, "SKILL_NOT_RUNNING"),
        ("POST", f"/console/api/skills/{SKILL}/start", [], 400, "CONSOLE_INVALID_BODY"),
        ("POST", f"/console/api/skills/{SKILL}/start", {"profile": 3}, 400, "CONSOLE_INVALID_BODY"),
        ("POST", f"/console/api/skills/{SKILL}/start", {"url": "x"}, 400, "CONSOLE_INVALID_BODY"),
        (
            "POST",
            f"/console/api/skills/{SKILL}/start",
            {"profile": "nope"},
            422,
            "SKILL_PROFILE_UNKNOWN",
        ),
        ("POST", "/console/api/skills/Bad%20Name/start", {}, 400, "SKILL_NAME_INVALID"),
        ("POST", "/console/api/skills/other/stop", {}, 409, "SKILL_NOT_RUNNING"),
        ("GET", "/console/api/cell/other/sources", None, 404, "SKILL_NOT_INSTALLED"),
        ("GET", f"/console/api/cell/{SKILL}/sources", None, 409, "SKILL_NOT_RUNNING"),
        ("GET", f"/console/api/cell/{SKILL}/frame/scene", None, 409, "SKILL_NOT_RUNNING"),
        ("GET", f"/console/api/cell/{SKILL}/frame/.hidden", None, 400, "CONSOLE_INVALID_ID"),
        ("GET", f"/console/api/cell/{SKILL}/state", None, 409, "SKILL_NOT_RUNNING"),
        ("GET", f"/console/api/cell/{SKILL}/tools", None, 409, "SKILL_NOT_RUNNING"),
        (
            "POST",
            f"/console/api/cell/{SKILL}/tools/arm.home/run",
            {"arguments": []},
            400,
            "CONSOLE_INVALID_BODY",
        ),
        (
            "POST",
            f"/console/api/cell/{SKILL}/tools/arm.home/run",
            {"args": {}},
            400,
            "CONSOLE_INVALID_BODY",
        ),
        ("POST", f"/console/api/cell/{SKILL}/tools/arm.home/run", {}, 409, "SKILL_NOT_RUNNING"),
        ("POST", f"/console/api/cell/{SKILL}/tools/%20/run", {}, 400, "CONSOLE_INVALID_ID"),
        ("GET", f"/console/api/cell/{SKILL}/invocations/%3Cx%3E", None, 400, "CONSOLE_INVALID_ID"),
        (
            "POST",
            f"/console/api/cell/{SKILL}/invocations/inv_1/cancel",
            {"x": 1},
            400,
            "CONSOLE_INVALID_BODY",
        ),
        ("GET", "/console/api/tasks?limit=999", None, 400, "CONSOLE_INVALID_QUERY"),
        ("GET", "/console/api/tasks/task_nope", None, 404, "PAOS_NOT_FOUND"),
        ("GET", "/console/api/tasks/%3Cscript%3E", None, 400, "CONSOLE_INVALID_ID"),
        (
            "GET",
            f"/console/api/tasks/{TASK}/evidence/art_nope",
            None,
            404,
            "CONSOLE_EVIDENCE_NOT_FOUND",
        ),
        (
            "GET",
            f"/console/api/tasks/{TASK}/evidence/art_x",
            None,
            404,
            "CONSOLE_EVIDENCE_NOT_CAPTURED",
        ),
        ("GET", "/console/api/audit?limit=-1", None, 400, "CONSOLE_INVALID_QUERY"),
        ("GET", "/console/api/nothing", None, 404, "NOT_FOUND"),
    ],
)
def test_bad_input_is_a_structured_4xx(
    base: httpx.Client, method: str, path: str, body: Any, status: int, code: str
) -> None:
    answer = base.request(method, path, headers=AUTH, json=body)
    assert answer.status_code == status, answer.text
    error = answer.json()["error"]
    assert error["code"] == code
    assert set(error) == {"code", "message", "retryable", "details"}


def test_a_task_lists_and_tells_its_story_with_frames_in_capture_order(base: httpx.Client) -> None:
    tasks = base.get("/console/api/tasks", headers=AUTH).json()["tasks"]
    assert [t["task_id"] for t in tasks] == [TASK]
    story = base.get(f"/console/api/tasks/{TASK}", headers=AUTH).json()
    assert [a["artifact_id"] for a in story["evidence"]] == ["art_b", "art_a", "art_x"]
    assert story["revisions"][0]["ordinal"] == 1
    frame = base.get(f"/console/api/tasks/{TASK}/evidence/art_a", headers=AUTH)
    assert frame.status_code == 200
    assert frame.headers["content-type"] == "image/png"
    assert frame.content == _frame_png(200)


def test_the_evidence_bundle_holds_the_story_and_every_captured_frame(base: httpx.Client) -> None:
    answer = base.get(f"/console/api/tasks/{TASK}/bundle", headers=AUTH)
    assert answer.status_code == 200
    assert answer.headers["content-disposition"] == f'attachment; filename="{TASK}-evidence.zip"'
    archive = zipfile.ZipFile(io.BytesIO(answer.content))
    assert archive.namelist() == [
        "task.json",
        "evidence/000-before-scene.png",
        "evidence/001-after-scene.png",
    ]
    assert archive.read("evidence/001-after-scene.png") == _frame_png(200)


def test_the_audit_lists_calls_newest_first_without_argument_values(base: httpx.Client) -> None:
    call = {
        "type": "portos_tool_call",
        "requestId": "r-audit-1",
        "name": "forge.skills.installed",
        "arguments": {},
    }
    assert base.post("/api/tools/call", headers=AUTH, json=call).status_code == 200
    records = base.get("/console/api/audit?limit=5", headers=AUTH).json()["records"]
    assert records[0]["requestId"] == "r-audit-1"
    assert records[0]["state"] == "completed"
    assert set(records[0]) >= {"argumentKeys", "durationMs", "principal"}
    assert records[0]["listedName"] == "forge_skills_installed"  # as tools/list shows it


def test_a_start_on_a_port_already_held_is_refused_naming_that_port(base: httpx.Client) -> None:
    # The port reaches the runtime, which refuses a held one before anything starts.
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        body = {"profile": "sim", "port": port}
        answer = base.post(f"/console/api/skills/{SKILL}/start", json=body, headers=AUTH)
    assert answer.status_code == 409, answer.text
    error = answer.json()["error"]
    assert error["code"] == "SKILL_GATEWAY_IN_USE"
    assert str(port) in error["message"]


@pytest.mark.parametrize("port", [0, 70000, "9001", True, 1.5])
def test_a_start_port_that_is_no_port_is_refused_as_the_port_field(
    base: httpx.Client, port: object
) -> None:
    answer = base.post(f"/console/api/skills/{SKILL}/start", json={"port": port}, headers=AUTH)
    assert answer.status_code == 400
    error = answer.json()["error"]
    assert (error["code"], error["details"]) == ("CONSOLE_INVALID_BODY", {"field": "port"})


class _LogsRuntime:
    """Answers ``logs`` as the RuntimeManager does, remembering how it was asked."""

    def __init__(self) -> None:
        self.asked: list[dict[str, object]] = []

    def logs(self, name: str, lines: int = 200, **options: object) -> str:
        self.asked.append({"name": name, "lines": lines, **options})
        return "world: ready\n"


def test_the_logs_panel_leaves_doras_own_diagnostics_out(tmp_path: Path) -> None:
    home = PaosHome(tmp_path / "home")
    runtime = _LogsRuntime()
    settings = ServerSettings(token=TOKEN)
    with serving_console(home, settings, runtime) as url:  # type: ignore[arg-type]
        answer = httpx.get(f"{url}/console/api/skills/{SKILL}/logs?lines=50", headers=AUTH)
    assert answer.json()["text"] == "world: ready\n"
    assert runtime.asked == [{"name": SKILL, "lines": 50, "keep_dora": False}]
