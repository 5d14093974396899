"""Skill Gateway tokens: private per-start files and which token goes to which URL."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from doraforge.skill_runtime.gateway_tokens import (
    GatewayTokens,
    create_token_file,
    remove_token_file,
    runtime_token,
    token_path,
)
from doraforge.skill_runtime.runtime_state import read_state
from tests.skill_runtime.runtime_support import recorded_state

URL = "http://127.0.0.1:9301"
OPERATOR = "operator-token-0123456789"


def test_every_start_writes_a_fresh_private_token_file(tmp_path: Path) -> None:
    first = create_token_file(tmp_path, "pick-place")
    first_token = first.read_text()
    second = create_token_file(tmp_path, "pick-place")

    assert first == second == token_path(tmp_path, "pick-place")
    assert second.read_text() != first_token
    assert stat.S_IMODE(second.stat().st_mode) == 0o600
    assert stat.S_IMODE(second.parent.stat().st_mode) == 0o700
    remove_token_file(second)
    remove_token_file(second)  # a second removal is no error
    assert not second.exists()


def test_a_live_runtime_gives_its_own_token_for_its_url_and_only_for_it(tmp_path: Path) -> None:
    path = create_token_file(tmp_path, "pick-place")
    state = recorded_state(tmp_path, "pick-place", "running", path)
    tokens = GatewayTokens(tmp_path, operator=OPERATOR)

    own = runtime_token(state)
    assert own is not None
    assert own == path.read_text().strip()
    assert tokens(URL) == tokens(URL + "/") == own
    assert tokens("http://127.0.0.1:9399") == OPERATOR
    assert GatewayTokens(tmp_path)("http://127.0.0.1:9399") is None
    assert own not in repr(tokens)
    assert OPERATOR not in repr(tokens)


def test_a_restart_is_followed_and_a_stopped_runtime_gives_no_token(tmp_path: Path) -> None:
    tokens = GatewayTokens(tmp_path)
    path = create_token_file(tmp_path, "pick-place")
    recorded_state(tmp_path, "pick-place", "running", path)
    before = tokens(URL)
    create_token_file(tmp_path, "pick-place")  # the next start

    assert tokens(URL) not in (None, before)
    recorded_state(tmp_path, "pick-place", "stopped", None)
    assert tokens(URL) is None


def test_an_unreadable_or_exposed_token_file_gives_no_token(tmp_path: Path) -> None:
    path = create_token_file(tmp_path, "pick-place")
    state = recorded_state(tmp_path, "pick-place", "running", path)
    path.chmod(0o644)

    assert runtime_token(state) is None
    path.unlink()
    assert runtime_token(state) is None
    # The operator's token is not offered instead: the URL is the skill's.
    assert GatewayTokens(tmp_path, operator=OPERATOR)(URL) is None


def test_a_state_recorded_before_gateways_had_tokens_still_reads(tmp_path: Path) -> None:
    state = recorded_state(tmp_path, "pick-place", "running", None)
    document = json.loads((tmp_path / "pick-place.json").read_text())
    del document["gateway_token_file"]
    (tmp_path / "pick-place.json").write_text(json.dumps(document))

    assert read_state(tmp_path, "pick-place") == state
    assert runtime_token(state) is None


def test_state_files_are_parsed_again_only_when_one_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import doraforge.skill_runtime.gateway_tokens as gateway_tokens
    from doraforge.skill_runtime.runtime_state import RuntimeState, all_states

    parses: list[Path] = []

    def counted(runtime_dir: Path) -> list[RuntimeState]:
        parses.append(runtime_dir)
        return all_states(runtime_dir)

    monkeypatch.setattr(gateway_tokens, "all_states", counted)
    tokens = GatewayTokens(tmp_path)
    path = create_token_file(tmp_path, "pick-place")
    recorded_state(tmp_path, "pick-place", "running", path)

    first = tokens(URL)
    assert first is not None
    assert tokens(URL) == tokens(URL + "/") == first
    assert len(parses) == 1
    recorded_state(tmp_path, "pick-place", "stopped", None)
    assert tokens(URL) is None
    assert len(parses) == 2
