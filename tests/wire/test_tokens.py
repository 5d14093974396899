"""Bearer tokens come from an environment variable or a private file, never elsewhere."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from doraforge.wire.tokens import TokenError, load_token, write_token


def test_a_written_token_file_is_private_and_reads_back(tmp_path: Path) -> None:
    path = tmp_path / "run" / "gateway.token"
    token = write_token(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert load_token(env=None, file=path, environ={}) == token
    assert write_token(path) != token  # every start gets a fresh token


def test_a_token_file_readable_by_others_is_refused_with_the_fix(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text("x" * 32)
    path.chmod(0o644)
    with pytest.raises(TokenError, match="chmod 600"):
        load_token(env=None, file=path, environ={})


def test_the_environment_variable_must_be_set_and_long_enough() -> None:
    assert load_token(env="T", file=None, environ={"T": "t" * 16}) == "t" * 16
    with pytest.raises(TokenError, match="not set"):
        load_token(env="T", file=None, environ={})
    with pytest.raises(TokenError, match="at least 16"):
        load_token(env="T", file=None, environ={"T": "short"})


def test_no_source_means_no_token_and_two_sources_are_refused(tmp_path: Path) -> None:
    assert load_token(env=None, file=None, environ={"T": "t" * 16}) is None
    with pytest.raises(TokenError, match="either"):
        load_token(env="T", file=tmp_path / "x", environ={"T": "t" * 16})


def test_a_missing_token_file_says_which_file(tmp_path: Path) -> None:
    with pytest.raises(TokenError, match="cannot read"):
        load_token(env=None, file=tmp_path / "absent", environ={})
