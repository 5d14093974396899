"""``doraforge recipes`` against a live registry with an operator token: save a file, list,
show, archive and restore, each as one line; the agent token, a bad file, a refused
definition and an unreachable server each fail in one line with a code and exit 1."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from doraforge.cli import approvals_command, main
from tests.registry.recipes.support import echo_twice
from tests.registry.recipes.test_routes import OPERATOR_TOKEN, serve_recipes
from tests.registry.server_support import TOKEN, running

ENV = approvals_command.OPERATOR_TOKEN_ENV
NAME = "recipe.echo-twice"


@pytest.fixture
def url(tmp_path: Path) -> Iterator[str]:
    app, _service = serve_recipes(tmp_path / "recipes")
    with running(app) as base:
        yield base


def run(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    home: Path,
    *argv: str,
    token: str = OPERATOR_TOKEN,
) -> tuple[int, str, str]:
    monkeypatch.setenv(ENV, token)
    code = main(["--home", str(home), *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _file(tmp_path: Path, document: object, name: str = "recipe.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps(document))
    return str(path)


def test_save_list_show_archive_and_restore_each_answer_one_line(
    url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    first = _file(tmp_path, echo_twice())
    assert run(capsys, monkeypatch, home, "recipes", "save", first, "--url", url) == (
        0,
        f"saved {NAME} rev 1\n",
        "",
    )
    assert run(capsys, monkeypatch, home, "recipes", "save", first, "--url", url)[1] == (
        f"unchanged {NAME} rev 1\n"
    )
    second = _file(tmp_path, echo_twice(description="Second."), "second.json")
    run(capsys, monkeypatch, home, "recipes", "save", second, "--url", url)
    code, out, err = run(capsys, monkeypatch, home, "recipes", "list", "--url", url)
    assert (code, err) == (0, "")
    assert out == f"{NAME} rev 2/2 available demo.echo,demo.echo\n"
    code, out, _ = run(capsys, monkeypatch, home, "recipes", "show", NAME, "--url", url)
    assert code == 0
    assert '"description": "Second."' in out
    assert out.splitlines()[-2:][0].startswith("* rev 2 saved ")
    assert out.splitlines()[-1].startswith("  rev 1 saved ")
    code, out, _ = run(capsys, monkeypatch, home, "recipes", "archive", NAME, "--url", url)
    assert (code, out) == (0, f"archived {NAME} (its 2 revisions are kept)\n")
    listed = run(capsys, monkeypatch, home, "recipes", "list", "--url", url)[1]
    assert listed == f"{NAME} rev 2/2 archived demo.echo,demo.echo\n"
    code, out, _ = run(
        capsys, monkeypatch, home, "recipes", "restore", NAME, "--revision", "1", "--url", url
    )
    assert (code, out) == (0, f"restored {NAME} at rev 1\n")
    code, out, _ = run(capsys, monkeypatch, home, "--json", "recipes", "list", "--url", url)
    assert json.loads(out)["recipes"][0]["activeRevision"] == 1


def test_every_failure_is_one_line_with_a_code_and_exit_one(
    url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    write = echo_twice(steps=[{"tool": "demo.write", "arguments": {"value": 1}}], output=[])
    bad_json = tmp_path / "bad.json"
    bad_json.write_text('{"name": 1, "name": 2}')
    cases = [
        (("save", _file(tmp_path, write)), "doraforge: RECIPE_WRITE_TOOL: step 1: demo.write"),
        (("save", str(bad_json)), "doraforge: RECIPE_FILE_INVALID: "),
        (("save", str(tmp_path / "missing.json")), "doraforge: RECIPE_FILE_UNREADABLE: "),
        (("show", "recipe.nothing"), "doraforge: RECIPE_NOT_FOUND: "),
        (("restore", "recipe.nothing"), "doraforge: RECIPE_NOT_FOUND: "),
    ]
    for argv, start in cases:
        code, out, err = run(capsys, monkeypatch, home, "recipes", *argv, "--url", url)
        assert (code, out) == (1, ""), argv
        assert err.startswith(start), err
        assert len(err.splitlines()) == 1
    code, _, err = run(capsys, monkeypatch, home, "recipes", "list", "--url", url, token=TOKEN)
    assert code == 1
    assert err.startswith("doraforge: OPERATOR_REQUIRED: ")
    assert "$DORAFORGE_OPERATOR_TOKEN" in err


def test_an_unreachable_registry_is_one_line_naming_serve(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from doraforge.skill_runtime.dora_run import free_port

    dead = f"http://127.0.0.1:{free_port()}"
    code, _, err = run(capsys, monkeypatch, tmp_path, "recipes", "list", "--url", dead)
    assert code == 1
    assert err.startswith("doraforge: REGISTRY_UNREACHABLE: ")
    assert "doraforge serve" in err
