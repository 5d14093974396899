"""The console in a real browser on a real cell: sign in with the token, start the sim
skill, watch live frames, run ``arm.home`` from its form, approve one waiting agent call and
deny another, read the finished task's filmstrip and verdict, probe an API tool.

The tests run in file order on one cell and one signed-in tab (starting the skill once
keeps the tier within its time budget); each says which earlier step it builds on.
"""

from __future__ import annotations

from typing import Any

import cv2
import numpy as np
import pytest
from playwright.sync_api import BrowserContext, Locator, Page, expect

from doraforge.skill_runtime.dora_run import free_port
from tests.e2e.console.conftest import WEATHER_KEY, Agent, Cell, shot
from tests.e2e.sim_skill import SKILL
from tests.support.mcp_errors import error_of
from tests.support.waiting import eventually

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

START_TIMEOUT_MS = 120_000
ACTION_TIMEOUT_MS = 60_000
#: A blank (one-colour) frame has a pixel standard deviation near 0; a rendered scene is far above.
MIN_FRAME_STD = 8.0


def _pixel_std(png: bytes) -> float:
    image = cv2.imdecode(np.frombuffer(png, dtype=np.uint8), cv2.IMREAD_GRAYSCALE)
    assert image is not None
    return float(image.std())


def _structured(result: Any) -> dict[str, Any]:
    assert result.structuredContent is not None, result.content
    content: dict[str, Any] = result.structuredContent
    return content


def test_a_wrong_token_is_refused_at_the_login_form_and_opens_nothing(
    browser: BrowserContext, cell: Cell
) -> None:
    tab = browser.new_page()  # a tab of its own: the token lives in one tab's session storage
    try:
        tab.goto(f"{cell.base}/console/#/tasks")
        tab.fill("#token", "not-the-token-0123456789")
        tab.click("#login button[type=submit]")
        expect(tab.locator("#login-error")).to_contain_text("The token was refused")
        expect(tab.locator("#nav")).to_be_hidden()
        assert tab.evaluate("sessionStorage.length") == 0
    finally:
        tab.close()


def test_a_start_port_that_is_no_port_is_marked_beside_its_field_and_nothing_starts(
    page: Page,
) -> None:
    page.goto(page.url.split("#")[0] + "#/skills")
    row = page.locator(f'#skills tr[data-skill="{SKILL}"]')
    port = row.locator("input.port")
    port.fill("70000")
    row.locator("button.start").click()
    expect(port).to_have_attribute("aria-invalid", "true")
    expect(row.locator(f"#port-{SKILL}-error")).to_contain_text("TCP port (1-65535)")
    expect(row.locator(".runtime-state")).to_have_text("not started")
    expect(page.locator("#status")).to_have_text("")


def test_the_operator_starts_the_sim_skill_from_the_skills_page(page: Page) -> None:
    # On the port the operator types; the row then shows the running Gateway's address.
    page.goto(page.url.split("#")[0] + "#/skills")
    row = page.locator(f'#skills tr[data-skill="{SKILL}"]')
    expect(row.locator(".runtime-state")).to_have_text("not started")
    chosen = free_port()
    row.locator("input.port").fill(str(chosen))
    row.locator("button.start").click()
    expect(row.locator(".runtime-state")).to_have_text("running", timeout=START_TIMEOUT_MS)
    expect(row.locator("input.port")).not_to_have_attribute("aria-invalid", "true")
    expect(row.locator("td.gateway")).to_have_text(f"http://127.0.0.1:{chosen}")
    row.locator("button.logs").click()
    expect(page.locator("#logs")).to_contain_text("starting 1.0.0 profile sim")
    shot(page, "skills")


def test_the_cell_page_shows_live_non_blank_frames_from_both_cameras(page: Page) -> None:
    # Builds on the skill started above.
    page.goto(page.url.split("#")[0] + "#/cell")
    for source in ("scene", "wrist"):
        camera = page.locator(f'img.camera[data-source="{source}"]')
        expect(camera).to_have_js_property("complete", True)

        def loaded(camera: Locator = camera) -> object:
            return camera.evaluate("img => img.naturalWidth > 0")

        eventually(
            loaded,
            within=30,
            what=f"a {source} frame",
        )
        first = camera.get_attribute("src")
        assert _pixel_std(camera.screenshot()) > MIN_FRAME_STD

        def replaced(camera: Locator = camera, first: str | None = first) -> bool:
            return camera.get_attribute("src") != first

        eventually(
            replaced,
            within=20,
            what=f"a newer {source} frame",
        )
    expect(page.locator("#joints")).to_contain_text("shoulder_pan", timeout=10_000)
    expect(page.locator('#tool-status tr[data-tool="arm.home"]')).to_contain_text("ready")
    shot(page, "cell")


def test_arm_home_runs_from_its_generated_form_to_succeeded(page: Page) -> None:
    page.goto(page.url.split("#")[0] + "#/tools")
    page.locator('#tool-list button[data-tool="arm.home"]').click()
    expect(page.locator("#tool-form")).to_contain_text("This tool takes no arguments.")
    page.click("#run")
    outcome = page.locator("#run-outcome")
    expect(outcome).not_to_be_empty(timeout=ACTION_TIMEOUT_MS)
    assert outcome.text_content() == "succeeded", page.locator("#run-result").text_content()
    expect(page.locator("#run-phase")).to_contain_text("completed")
    shot(page, "tools")


def test_the_status_line_belongs_to_its_page(page: Page) -> None:
    # Builds on arm.home above, whose admission the Tools page said in the status line.
    expect(page.locator("#status")).to_contain_text("admitted as")
    page.goto(page.url.split("#")[0] + "#/tasks")
    expect(page.locator("#page h1")).to_have_text("Tasks")
    expect(page.locator("#status")).to_have_text("")


def test_a_missing_required_argument_is_marked_on_its_own_field(page: Page) -> None:
    page.goto(page.url.split("#")[0] + "#/tools")
    page.locator('#tool-list button[data-tool="arm.move_to_pose"]').click()
    page.click("#run")
    field = page.locator("#arg-position")
    expect(field).to_have_attribute("aria-invalid", "true")
    expect(page.locator("#arg-position-error")).to_have_text("required")
    expect(field).to_be_focused()
    expect(page.locator("#run-phase")).to_be_empty()  # nothing was sent
    page.fill("#arg-position", "[0.3,")
    page.click("#run")
    expect(page.locator("#arg-position-error")).to_have_text("not valid JSON")
    expect(page.locator("#run-phase")).to_be_empty()


def _pending_row(page: Page) -> Any:
    page.goto(page.url.split("#")[0] + "#/approvals")
    row = page.locator('#approvals tr[data-tool="forge_tool_start_action"]')
    expect(row).to_have_count(1, timeout=30_000)
    return row


def test_an_approved_agent_call_runs_and_a_denied_one_reaches_the_agent_as_denied(
    page: Page, agent: Agent, cell: Cell
) -> None:
    created = _structured(agent.call("forge_task_create", {"skill": SKILL}))
    task_id = created["task"]["task_id"]
    start = {"task_id": task_id, "tool_id": "arm.home", "arguments": {}, "step": "home the arm"}
    waiting = agent.submit("forge_tool_start_action", start)
    row = _pending_row(page)
    expect(row).to_contain_text("arm.home")
    shot(page, "approvals")
    row.locator("input.reason").fill("cell is clear")
    row.locator("button.approve").click()
    started = _structured(waiting.result(120))
    assert started.get("record_id"), started
    query = {"task_id": task_id, "record_id": started["record_id"]}

    def finished() -> dict[str, Any] | None:
        answer = _structured(agent.call("forge_tool_action_result", query))
        return answer["record"] if answer["status"] == "available" else None

    record = eventually(finished, within=60, what="the approved arm.home to finish")
    assert record["state"] == "completed"

    refused = agent.submit("forge_tool_start_action", start)
    row = _pending_row(page)
    row.locator("input.reason").fill("not now")
    row.locator("button.deny").click()
    denied = refused.result(120)
    assert denied.meta is not None
    assert denied.meta["doraforge/state"] == "denied"
    assert error_of(denied)["code"] == "TOOL_APPROVAL_DENIED"
    expect(page.locator("#decided")).to_contain_text("not now")

    finalized = _structured(agent.call("forge_task_finalize", {"task_id": task_id}))
    if finalized["task"]["state"] not in ("succeeded", "failed", "cancelled"):
        agent.call("forge_task_cancel", {"task_id": task_id})
    with cell.http() as http:
        assert http.get(f"/console/api/tasks/{task_id}").json()["task"]["state"] in (
            "succeeded",
            "failed",
            "cancelled",
        )


def test_the_finished_task_shows_its_filmstrip_verdict_and_reasons(page: Page) -> None:
    # Builds on the task the agent ran above.
    page.goto(page.url.split("#")[0] + "#/tasks")
    page.locator("#tasks a.task-link").first.click()
    frames = page.locator("#filmstrip figure.frame img")
    expect(frames.first).to_be_visible(timeout=10_000)
    assert frames.count() >= 2
    eventually(
        lambda: frames.evaluate_all("imgs => imgs.every(i => i.complete && i.naturalWidth > 0)"),
        within=15,
        what="every evidence frame to load",
    )
    assert _pixel_std(frames.first.screenshot()) > MIN_FRAME_STD
    # Each frame says which step it was taken around, as the agent named it.
    captions = page.locator("#filmstrip figure.frame figcaption .step")
    expect(captions.last).to_have_text("home the arm")
    expect(page.locator("#robot")).to_have_text("robot sim_arm")
    expect(page.locator("#verdict h2 .state")).not_to_have_text("not decided yet")
    criteria = page.locator("#criteria tbody tr")
    expect(criteria.first).to_be_visible()
    assert criteria.count() >= 2
    expect(page.locator("#criteria td.reason").first).not_to_be_empty()
    with page.expect_download() as download:
        page.click("#download-bundle")
    assert download.value.suggested_filename.endswith("-evidence.zip")
    shot(page, "tasks")


BUNDLE = {
    "schemaVersion": 1,
    "name": "weather",
    "description": "Forecasts for the cell's site (the probe renders without dialling).",
    "baseUrl": "https://api.example.com",
    "headers": {"X-Key": "{{secret:WEATHER_KEY}}"},
    "credentials": ["WEATHER_KEY"],
    "tools": [
        {
            "name": "forecast",
            "description": "The forecast for one city",
            "path": "/v1/forecast/{city}",
            "params": [
                {"name": "city", "in": "path", "required": True, "description": "city name"},
                {"name": "days", "in": "query", "schema": {"type": "integer"}},
            ],
            "response": {
                "type": "json",
                "envelope": {"codeField": "code", "success": [0], "payloadField": "data"},
            },
        }
    ],
}


def test_an_api_tool_reads_as_a_person_would_and_its_probe_renders_the_request(
    page: Page, cell: Cell
) -> None:
    with cell.http() as http:
        assert http.put("/api/api-tools/weather", json=BUNDLE).status_code == 201
    page.goto(page.url.split("#")[0] + "#/api-tools")
    page.locator('#api-services a.service-link:text("weather")').click()
    detail = page.locator("#api-detail")
    expect(detail).to_contain_text("credential WEATHER_KEY")
    expect(detail).to_contain_text("/v1/forecast/{city}")
    expect(detail.locator("table.params")).to_contain_text("query")
    expect(detail).to_contain_text("success when code is one of [0]")
    page.fill("#arg-city", "Lyon")
    page.fill("#arg-days", "3")
    page.click("#probe-run")
    result = page.locator("#probe-result")
    expect(result).to_contain_text("/v1/forecast/Lyon")
    expect(result).not_to_contain_text(WEATHER_KEY)
    shot(page, "api-tools")


def test_the_audit_page_lists_the_agent_calls_with_their_outcomes(page: Page, cell: Cell) -> None:
    # Builds on the approved and the denied call above.
    page.goto(page.url.split("#")[0] + "#/audit")
    audit = page.locator("#audit")
    expect(audit).to_contain_text("forge_tool_start_action")
    expect(audit).to_contain_text("TOOL_APPROVAL_DENIED")
    expect(audit).to_contain_text("approval approved")
    expect(audit).to_contain_text("cell is clear")  # the operator's reason is the record
    with cell.http() as http:
        task_id = http.get("/console/api/tasks").json()["tasks"][-1]["task_id"]
    expect(audit).not_to_contain_text(task_id)  # argument values never enter
    shot(page, "audit")


def test_a_cancelled_task_has_cancelled_as_its_verdict(page: Page, agent: Agent) -> None:
    # Builds on the running skill: a task the agent cancels before any step.
    created = _structured(agent.call("forge_task_create", {"skill": SKILL}))
    task_id = created["task"]["task_id"]
    agent.call("forge_task_cancel", {"task_id": task_id, "reason": "operator_requested"})
    page.goto(page.url.split("#")[0] + f"#/tasks/{task_id}")
    expect(page.locator("#verdict h2 .state")).to_have_text("cancelled", timeout=30_000)
    expect(page.locator("#verdict")).not_to_contain_text("not decided yet")


def test_the_console_cancels_an_action_it_admitted_on_the_real_gateway(cell: Cell) -> None:
    # Builds on the running skill; plain HTTP through the console's routes.
    base = f"/console/api/cell/{SKILL}"
    with cell.http() as http:
        frame = http.get(f"{base}/frame/scene")
        assert frame.headers["content-type"] == "image/jpeg"
        assert frame.content.startswith(b"\xff\xd8\xff")
        admitted = http.post(f"{base}/tools/arm.home/run", json={"arguments": {}})
        assert admitted.status_code == 202, admitted.text
        invocation_id = admitted.json()["admission"]["invocation_id"]
        cancel = http.post(f"{base}/invocations/{invocation_id}/cancel", json={})
        assert cancel.status_code == 202
        assert cancel.json()["requested"] is True

        def terminal() -> str | None:
            status = http.get(f"{base}/invocations/{invocation_id}").json()["invocation"]
            return status["phase"] if status["terminal"] else None

        # A cancel that arrives after the short move finished leaves it completed.
        phase = eventually(terminal, within=30, what="the cancelled arm.home to end")
        assert phase in ("cancelled", "completed")
        listed = http.get(f"{base}/invocations").json()["invocations"]
        assert invocation_id in {row["invocation_id"] for row in listed}
        refused = http.post(f"{base}/tools/arm.home/run", json={"arguments": {"x": 1}})
        assert refused.status_code in (400, 422)
        assert refused.json()["error"]["code"].startswith("FORGE_TOOL_")


def test_a_stop_while_a_task_is_active_asks_before_forcing_then_stops(
    page: Page, agent: Agent
) -> None:
    # Builds on the running skill; the last test, since it stops it.
    created = _structured(agent.call("forge_task_create", {"skill": SKILL}))
    questions: list[str] = []

    def decline(dialog: Any) -> None:
        questions.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", decline)
    page.goto(page.url.split("#")[0] + "#/skills")
    row = page.locator(f'#skills tr[data-skill="{SKILL}"]')
    row.locator("button.stop").click()
    expect(page.locator("#status")).to_contain_text("not forced")
    assert len(questions) == 1
    assert "in use" in questions[0]
    expect(row.locator(".runtime-state")).to_have_text("running")
    page.remove_listener("dialog", decline)
    agent.call("forge_task_cancel", {"task_id": created["task"]["task_id"]})
    row.locator("button.stop").click()
    expect(row.locator(".runtime-state")).to_have_text("stopped", timeout=60_000)
