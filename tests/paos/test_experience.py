"""Experience: redacted episodes scoped to a skill version, lessons, fail-open handling."""

from __future__ import annotations

import hashlib
import json
import logging
from typing import Any

import pytest

from doraforge.paos.experience import (
    Episode,
    InMemoryExperienceLog,
    episode_from,
    fingerprint,
    lessons,
    record_episode,
)

SECRETS = (
    "sk-live-7f3a9c",
    "Bearer eyJhbGciOi",
    "hunter2",
    "https://gateway.internal:8765/tools",
    "http://10.0.0.7:9000",
    "gateway.internal",
    "0.3481",
    "-0.2193",
    "0.0221",
    "0.785",
    "/home/operator",
    "inv-0001",
    "att-0001",
    "task-0001",
    "rev-0001",
    "bind-0001",
    "put the red cube",
)
DIGEST = "ab" * 32
BINDING = {
    "binding_id": "bind-0001",
    "skill": "pick_place",
    "version": "1.2.0",
    "gateway_url": "https://gateway.internal:8765/tools",
    "token": "sk-live-7f3a9c",
}
TASK = {
    "task_id": "task-0001",
    "binding_id": "bind-0001",
    "goal": "put the red cube at 0.3481, -0.2193",
    "contract": {"mode": "recovery", "goal": "put the red cube", "replan_budget": 1},
    "state": "succeeded",
    "replans_used": 1,
}
REVISIONS = [
    {"revision_id": "rev-0001", "ordinal": 1, "reason": "first plan hunter2", "verdict": None},
    {"revision_id": "rev-0002", "ordinal": 2, "reason": "retry at 0.785", "verdict": None},
]
VERDICTS = [
    {
        "revision_id": "rev-0001",
        "status": "replan_required",
        "detail": "cube at (0.3481, -0.2193)",
        "results": [
            {"criterion_id": "cube_in_zone", "status": "fail", "detail": "x=0.3481"},
            {"criterion_id": "seen_in_zone", "status": "inconclusive", "detail": "no frame"},
        ],
    },
    {
        "revision_id": "rev-0002",
        "status": "success",
        "results": [{"criterion_id": "cube_in_zone", "status": "pass", "detail": "0.0221"}],
    },
]


def record(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "record_id": "rec-0001",
        "revision_id": "rev-0001",
        "tool_id": "arm.move_to_pose",
        "semantics": "action",
        "ownership": None,
        "caller_id": "paos:task-0001:rec-0001",
        "arguments": {"position": [0.3481, -0.2193, 0.0221], "yaw": 0.785},
        "arguments_sha256": DIGEST,
        "state": "completed",
        "invocation_id": "inv-0001",
        "attempt_id": "att-0001",
        "result": {
            "status": "succeeded",
            "outputs": {"reached": [0.3481, -0.2193, 0.0221], "auth": "Bearer eyJhbGciOi"},
        },
        "error": None,
    }
    return base | overrides


RECORDS = [
    record(
        state="failed",
        error={
            "code": "motion_timeout",
            "message": "did not reach 0.3481 via http://10.0.0.7:9000",
            "details": {"password": "hunter2"},
        },
        result=None,
    ),
    record(record_id="rec-2", revision_id="rev-0002", invocation_id="inv-2", attempt_id="att-2"),
    record(tool_id="world.scene_state", semantics="query", invocation_id=None, attempt_id=None),
]
EVIDENCE: list[dict[str, Any]] = [
    {
        "artifact_id": "ev-1",
        "revision_id": "rev-0001",
        "source": "scene",
        "phase": "before",
        "sha256": DIGEST,
        "path": "evidence/task-0001/ev-1.jpg",
        "file": "/home/operator/.paos/evidence/task-0001/ev-1.jpg",
        "width": 640,
    },
    {
        "artifact_id": "ev-2",
        "revision_id": "rev-0002",
        "source": "scene",
        "phase": "after",
        "error": {"code": "capture_stale", "message": "see https://gateway.internal:8765/tools"},
    },
]


def episode() -> Episode:
    return episode_from(TASK, REVISIONS, RECORDS, VERDICTS, EVIDENCE, BINDING)


def test_an_episode_carries_no_secret_url_endpoint_id_or_coordinate() -> None:
    text = json.dumps(episode())
    leaked = [secret for secret in SECRETS if secret in text]
    assert leaked == []
    assert "outputs" not in text
    assert "arguments" not in text


def test_an_episode_keeps_the_skill_version_verdicts_and_tool_facts() -> None:
    found = episode()

    assert (found["skill"], found["version"]) == ("pick_place", "1.2.0")
    assert found["outcome"] == "succeeded"
    assert found["mode"] == "recovery"
    assert found["replans_used"] == 1
    assert [r["verdict"] for r in found["revisions"]] == ["replan_required", "success"]
    assert found["revisions"][0]["criteria"] == [
        {"criterion_id": "cube_in_zone", "status": "fail"},
        {"criterion_id": "seen_in_zone", "status": "inconclusive"},
    ]
    failed, retried, query = found["records"]
    assert failed == {
        "revision_ordinal": 1,
        "tool_id": "arm.move_to_pose",
        "semantics": "action",
        "ownership": None,
        "status": "failed",
        "error_code": "motion_timeout",
        "invocation": fingerprint("inv-0001"),
        "attempt": fingerprint("att-0001"),
    }
    assert retried["revision_ordinal"] == 2
    assert query["invocation"] is None
    assert found["evidence"] == [
        {"revision_ordinal": 1, "source": "scene", "phase": "before", "sha256": DIGEST,
         "capture_error": None},
        {"revision_ordinal": 2, "source": "scene", "phase": "after", "sha256": None,
         "capture_error": "capture_stale"},
    ]  # fmt: skip


def test_fingerprints_are_sha256_of_the_ids_and_stable() -> None:
    assert fingerprint("inv-0001") == "sha256:" + hashlib.sha256(b"inv-0001").hexdigest()
    assert episode()["task"] == episode()["task"] == fingerprint("task-0001")
    assert episode()["binding"] == fingerprint("bind-0001")


def test_verdicts_stored_on_revisions_are_used_directly() -> None:
    revisions = [dict(r, verdict=v) for r, v in zip(REVISIONS, VERDICTS, strict=True)]
    found = episode_from(TASK, revisions, RECORDS, [], EVIDENCE, BINDING)
    assert [r["verdict"] for r in found["revisions"]] == ["replan_required", "success"]


def test_strings_that_are_not_identifiers_are_dropped() -> None:
    odd = record(tool_id="https://evil.example/x", error={"code": "0.3481"}, state="failed")
    found = episode_from(TASK, REVISIONS, [odd], [], [], BINDING | {"skill": "a b/c"})
    assert found["skill"] is None
    assert found["records"][0]["tool_id"] is None
    assert found["records"][0]["error_code"] is None


@pytest.mark.parametrize(
    "junk",
    [
        None,
        7,
        "text",
        [None, 3, "x"],
        [{"state": object(), "error": "boom"}],
        {"a": 1},
        [{"revision_id": ["unhashable"], "status": {}, "results": [{"status": []}]}],
    ],
)
def test_odd_input_never_raises(junk: Any) -> None:
    found = episode_from(junk, junk, junk, junk, junk, junk)
    assert found["schema"] == "doraforge.paos.episode/v1"
    json.dumps(found)
    assert lessons([found, junk, {"skill": None, "version": None, "records": junk}], "s", "v") == []


def test_record_episode_keeps_one_episode_per_task_and_is_fail_open(
    caplog: pytest.LogCaptureFixture,
) -> None:
    log = InMemoryExperienceLog()
    args = (TASK, REVISIONS, RECORDS, VERDICTS, EVIDENCE, BINDING)

    first = record_episode(log, *args)
    record_episode(log, *args)

    assert log.episodes("pick_place", "1.2.0") == [first]
    assert log.episodes("pick_place", "1.3.0") == []

    class Broken:
        def add_episode(self, *args: Any) -> None:
            raise OSError("disk full")

        def episodes(self, skill: str, version: str) -> list[dict[str, Any]]:
            return []

    with caplog.at_level(logging.ERROR, logger="doraforge.paos.experience"):
        assert record_episode(Broken(), *args) is None
    assert "could not record an episode" in caplog.text
    assert record_episode(log, {}, [], [], [], [], {}) is None


def test_lessons_cluster_failures_by_tool_and_error_code_within_one_skill_version() -> None:
    failing = episode()
    other_version = episode_from(TASK, REVISIONS, RECORDS, VERDICTS, EVIDENCE,
                                 BINDING | {"version": "2.0.0"})  # fmt: skip
    unknown = episode_from(TASK, REVISIONS, [record(state="unknown", error=None)], [], [], BINDING)
    episodes = [failing, failing, unknown, other_version, "garbage", None]

    found = lessons(episodes, "pick_place", "1.2.0")

    tool = {(x["tool_id"], x["error_code"]): x for x in found if x["kind"] == "tool_failure"}
    assert set(tool) == {("arm.move_to_pose", "motion_timeout"), ("arm.move_to_pose", "unknown")}
    timeout = tool["arm.move_to_pose", "motion_timeout"]
    assert (timeout["count"], timeout["episodes"], timeout["of_episodes"]) == (2, 2, 3)
    assert "arm.move_to_pose" in timeout["advice"]
    assert "reconcile" in tool["arm.move_to_pose", "unknown"]["advice"]
    checks = {(x["criterion_id"], x["status"]) for x in found if x["kind"] == "verification"}
    assert checks == {("cube_in_zone", "fail"), ("seen_in_zone", "inconclusive")}
    assert all((x["skill"], x["version"]) == ("pick_place", "1.2.0") for x in found)
    assert found[0]["count"] >= found[-1]["count"]


def test_no_episodes_of_the_version_means_no_lessons() -> None:
    assert lessons([episode()], "pick_place", "9.9.9") == []
    assert lessons(None, "pick_place", "1.2.0") == []  # type: ignore[arg-type]


def test_tampered_episodes_yield_the_lessons_that_can_be_read() -> None:
    tampered = {
        "skill": "pick_place",
        "version": "1.2.0",
        "records": [{"tool_id": "gripper.grasp", "status": {}}, {"status": "failed"}, 5],
        "revisions": [{"criteria": [{"criterion_id": "c", "status": ["fail"]}]}],
    }
    found = lessons([tampered], "pick_place", "1.2.0")
    tool_lessons = [x for x in found if x["kind"] == "tool_failure"]
    assert tool_lessons == found
    assert [(x["tool_id"], x["error_code"]) for x in tool_lessons] == [("?", "failed")]
