"""Bearer tokens: read once at an entry point from an environment variable or a file,
never from a command line, never logged."""

from __future__ import annotations

import os
import secrets
import stat
from collections.abc import Mapping
from pathlib import Path

from doraforge.wire.guard import MIN_TOKEN_LENGTH


class TokenError(ValueError):
    """A configured token source that cannot be used; the message says what to do."""


def secret_name(name: str) -> bool:
    """Whether ``name`` is one of doraforge's token variables (the registry's agent and
    operator tokens, a Gateway's token or token file): never handed to a skill's code or a
    dataflow's nodes, and a profile may not ask for one in ``required_environment``."""
    return name.startswith("DORAFORGE_") and "TOKEN" in name


def load_token(
    *, env: str | None, file: str | Path | None, environ: Mapping[str, str]
) -> str | None:
    """The token named by ``env`` (a variable name) or ``file`` (a path), else ``None``.

    A token file must not be readable by group or others (``chmod 600``), as ssh insists
    for keys. Raises :class:`TokenError` for a missing, empty, short or exposed token.
    """
    if env is not None and file is not None:
        raise TokenError("name either token_env or token_file, not both")
    if env is not None:
        token = environ.get(env, "").strip()
        if not token:
            raise TokenError(f"token_env: the environment variable {env} is not set")
        return _checked(token, f"${env}")
    if file is not None:
        return _checked(_read_private(Path(file)), str(file))
    return None


def write_token(path: Path) -> str:
    """Create ``path`` (mode 0600) holding a new random token; returns the token."""
    token = secrets.token_urlsafe(32)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    # Created 0600 from the first byte: never a moment in which others could read it.
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        handle.write(token + "\n")
    return token


def _read_private(path: Path) -> str:
    try:
        # One open: the mode checked is the mode of the very file read (no swap between).
        with path.open("rb") as handle:
            mode = os.fstat(handle.fileno()).st_mode
            text = handle.read().decode("utf-8").strip()
    except OSError as exc:
        raise TokenError(f"token_file: cannot read {path} ({exc.strerror})") from exc
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise TokenError(f"token_file: {path} is readable by others; run chmod 600 {path}")
    return text


def _checked(token: str, where: str) -> str:
    if len(token) < MIN_TOKEN_LENGTH:
        raise TokenError(f"{where}: a bearer token needs at least {MIN_TOKEN_LENGTH} characters")
    return token
