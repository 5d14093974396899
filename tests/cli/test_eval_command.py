"""``doraforge eval agent-context``: the report it prints, its exit status against the
threshold, and the one line and exit 2 of a fixture it cannot use."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from doraforge.cli import main
from tests.support.context_tools import CONTEXT_TOOLS

SUITE = """\
version: 1
suite: tiny
sources:
  default:
    tools:
      items:
        - {key: arm-move, kind: tool, label: arm.move}
cases:
  - id: list-is-fresh
    request: {tool: list_context, arguments: {scope: tools}}
    expect: {pointer: /sourceStatus, equals: fresh}
  - id: wrongly-expects-stale
    request: {tool: list_context, arguments: {scope: tools}}
    expect:
      - {pointer: /total, equals: 1}
      - {pointer: /sourceStatus, equals: stale}
  - id: wrongly-expects-an-error-over-mcp
    via: mcp
    request: {tool: get_context, arguments: {ref: {$ref: tools/arm-move}}}
    expect: {isError: true, pointer: /code, type: string}
  - id: not-yet
    skip: waiting for a fixture of its own
    request: {tool: context_profile}
    expect: {pointer: /profile, equals: metadata}
"""


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    status = main(["eval", "agent-context", *args])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def report_of(out: str) -> dict[str, Any]:
    report: dict[str, Any] = json.loads(out)
    return report


def case(report: dict[str, Any], case_id: str) -> dict[str, Any]:
    return next(c for c in report["cases"] if c["id"] == case_id)


def write_suite(tmp_path: Path, text: str = SUITE) -> Path:
    path = tmp_path / "suite.yml"
    path.write_text(text)
    return path


def line_of(text: str, needle: str) -> int:
    return next(n for n, line in enumerate(text.splitlines(), 1) if needle in line)


def test_shipped_suite_passes_every_case_and_says_where_each_comes_from(
    capsys: pytest.CaptureFixture[str],
) -> None:
    status, out, err = run(capsys, "--failure-threshold", "0")
    report = report_of(out)
    failing = [(c["id"], c["reason"]) for c in report["cases"] if c["outcome"] != "pass"]
    assert failing == []
    assert (status, err) == (0, "")
    summary = report["summary"]
    assert summary == {
        "total": len(report["cases"]),
        "pass": summary["total"],
        "fail": 0,
        "error": 0,
        "skip": 0,
    }
    assert report["passed"] is True
    for entry in report["cases"]:
        assert re.fullmatch(
            r"doraforge/registry/context/fixtures/agent_context\.yml:\d+", entry["source"]
        )
        assert entry["pointers"]
    assert {c["tool"] for c in report["cases"]} >= CONTEXT_TOOLS | {"tools/list", "manifest"}
    assert {c["via"] for c in report["cases"]} == {"service", "mcp"}


def test_a_wrong_expectation_fails_naming_case_line_and_pointer(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = write_suite(tmp_path)
    status, out, err = run(capsys, "--fixture", str(path))
    report = report_of(out)
    assert status == 1
    assert report["summary"] == {"total": 4, "pass": 1, "fail": 2, "error": 0, "skip": 1}
    assert report["passed"] is False
    stale = case(report, "wrongly-expects-stale")
    assert stale["outcome"] == "fail"
    assert stale["source"] == f"{path}:{line_of(SUITE, 'id: wrongly-expects-stale')}"
    assert (stale["tool"], stale["pointer"]) == ("list_context", "/sourceStatus")
    assert stale["pointers"] == ["/total", "/sourceStatus"]
    assert stale["reason"] == '/sourceStatus is "fresh", expected "stale"'
    over_mcp = case(report, "wrongly-expects-an-error-over-mcp")
    assert (over_mcp["outcome"], over_mcp["via"]) == ("fail", "mcp")
    assert "expected a tool error" in over_mcp["reason"]
    assert case(report, "not-yet")["outcome"] == "skip"
    assert case(report, "list-is-fresh")["outcome"] == "pass"
    assert len(err.splitlines()) == 1
    assert err.startswith("doraforge: EVAL_FAILED: 2 failed and 0 errored of 4 cases")
    assert "wrongly-expects-stale" in err


@pytest.mark.parametrize(("threshold", "status"), [("1", 1), ("2", 0), ("3", 0)])
def test_the_threshold_tolerates_up_to_n_failed_or_errored_cases(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, threshold: str, status: int
) -> None:
    code, out, _ = run(
        capsys, "--fixture", str(write_suite(tmp_path)), "--failure-threshold", threshold
    )
    report = report_of(out)
    assert code == status
    assert report["passed"] is (status == 0)
    assert report["threshold"] == int(threshold)


def test_a_negative_threshold_is_bad_usage(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        main(["eval", "agent-context", "--failure-threshold", "-1"])
    assert stopped.value.code == 2
    assert "not a whole number" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("text", "code", "where"),
    [
        (None, "EVAL_FIXTURE_UNREADABLE", "cannot read the fixture"),
        ("version: 1\nsuite: x\ncases:\n  - id: a\n    id: b\n", "EVAL_FIXTURE_INVALID", ":5:"),
        (
            SUITE.replace("equals: fresh", "equal: fresh"),
            "EVAL_FIXTURE_INVALID",
            f":{line_of(SUITE, 'equals: fresh')}: cases.0.expect.0.equal: Extra inputs",
        ),
        (
            SUITE.replace("sources:\n  default", "sources:\n  others"),
            "EVAL_FIXTURE_INVALID",
            "unknown source set 'default'",
        ),
        ("[1, 2]\n", "EVAL_FIXTURE_INVALID", "<root>"),
    ],
    ids=["missing", "duplicate-key", "misspelt-matcher", "unknown-source-set", "not-a-mapping"],
)
def test_an_unusable_fixture_is_one_line_with_a_code_and_exit_2(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str | None, code: str, where: str
) -> None:
    path = tmp_path / "missing.yml" if text is None else write_suite(tmp_path, text)
    status, out, err = run(capsys, "--fixture", str(path))
    assert (status, out) == (2, "")
    assert len(err.splitlines()) == 1
    assert err.startswith(f"doraforge: {code}: {path}")
    assert where in err
