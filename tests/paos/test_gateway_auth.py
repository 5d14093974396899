"""Ad-hoc Gateway tokens: the operator's token and the token file a ``dora run`` gets."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from doraforge.paos.gateway_auth import TOKEN_ENV, TOKEN_FILE_ENV, dataflow_auth, operator_token
from doraforge.wire.tokens import TokenError, load_token

TOKEN = "operator-token-0123456789"


def _private_file(path: Path, text: str) -> Path:
    path.write_text(text + "\n")
    path.chmod(0o600)
    return path


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_operator_token_comes_from_the_value_or_the_file(tmp_path: Path) -> None:
    token_file = _private_file(tmp_path / "t", TOKEN)

    assert operator_token({TOKEN_ENV: TOKEN}) == TOKEN
    assert operator_token({TOKEN_FILE_ENV: str(token_file)}) == TOKEN
    assert operator_token({}) is None
    assert operator_token({TOKEN_ENV: ""}) is None


@pytest.mark.parametrize(
    ("environ", "message"),
    [
        ({TOKEN_ENV: "short"}, "at least 16"),
        ({TOKEN_ENV: TOKEN, TOKEN_FILE_ENV: "/x"}, "not both"),
        ({TOKEN_FILE_ENV: "/no/such/token/file"}, "cannot read"),
    ],
)
def test_a_bad_operator_token_is_refused_with_the_reason(
    environ: dict[str, str], message: str
) -> None:
    with pytest.raises(TokenError, match=message):
        operator_token(environ)


def test_a_token_file_readable_by_others_is_refused(tmp_path: Path) -> None:
    exposed = _private_file(tmp_path / "t", TOKEN)
    exposed.chmod(0o644)

    with pytest.raises(TokenError, match="chmod 600"):
        operator_token({TOKEN_FILE_ENV: str(exposed)})


def test_a_token_value_reaches_the_gateway_as_a_private_file_removed_afterwards() -> None:
    base = {"PATH": "/bin", TOKEN_ENV: TOKEN}

    with dataflow_auth(base) as auth:
        path = auth.token_file
        assert path is not None
        env = auth.environment(base)
        assert env[TOKEN_FILE_ENV] == str(path)
        assert TOKEN_ENV not in env  # the nodes get the file, never the secret
        assert env["PATH"] == "/bin"
        assert load_token(env=None, file=path, environ={}) == TOKEN == auth.token
        assert _mode(path) == 0o600
        assert _mode(path.parent) == 0o700
        assert "DORAFORGE_GATEWAY_TOKEN" in auth.mode
        assert TOKEN not in repr(auth)

    assert not path.exists()
    assert not path.parent.exists()


def test_a_token_file_is_handed_on_as_it_is_and_kept(tmp_path: Path) -> None:
    token_file = _private_file(tmp_path / "mine.token", TOKEN)
    base = {TOKEN_FILE_ENV: str(token_file)}

    with dataflow_auth(base) as auth:
        assert auth.environment(base)[TOKEN_FILE_ENV] == str(token_file)
        assert auth.token == TOKEN
        assert str(token_file) in auth.mode

    assert token_file.read_text() == TOKEN + "\n"


def test_without_a_token_the_dataflow_runs_without_one_and_says_so() -> None:
    with dataflow_auth({"PATH": "/bin"}) as auth:
        assert auth.token is None
        assert auth.token_file is None
        assert auth.environment({"PATH": "/bin"}) == {"PATH": "/bin"}
        assert auth.mode.startswith("no token")


def test_generate_replaces_any_operator_token_with_a_fresh_one(tmp_path: Path) -> None:
    operator_file = _private_file(tmp_path / "operator.token", TOKEN)
    base = {TOKEN_ENV: TOKEN, TOKEN_FILE_ENV: str(operator_file)}  # even both: ignored

    with dataflow_auth(base, generate=True) as first, dataflow_auth(base, generate=True) as second:
        env = first.environment(base)
        assert first.token not in (None, TOKEN, second.token)
        assert env[TOKEN_FILE_ENV] == str(first.token_file) != str(operator_file)
        assert TOKEN_ENV not in env
        assert load_token(env=None, file=first.token_file, environ={}) == first.token

    assert first.token_file is not None
    assert not first.token_file.exists()


def test_a_dataflows_nodes_never_see_the_registrys_or_operators_tokens() -> None:
    base = {
        "PATH": "/bin",
        "DORAFORGE_REGISTRY_TOKEN": "agent-secret",
        "DORAFORGE_OPERATOR_TOKEN": "operator-secret",
        "DORAFORGE_LOG_LEVEL": "info",
    }

    with dataflow_auth(base) as auth:
        env = auth.environment(base)

    assert env == {"PATH": "/bin", "DORAFORGE_LOG_LEVEL": "info"}
