"""Bearer tokens for ad-hoc Gateways: the operator's token and a dataflow's token file.

A Gateway reads its token from the file ``DORAFORGE_GATEWAY_TOKEN_FILE`` names (mode
0600). The operator gives PAOS's clients a token in ``DORAFORGE_GATEWAY_TOKEN`` (a
value) or ``DORAFORGE_GATEWAY_TOKEN_FILE`` (a file); both are read once, by the entry
point, from the environment mapping it passes here. Skill-started Gateways have their own
per-start tokens (``doraforge.skill_runtime.gateway_tokens``) and never use these.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from doraforge.wire.tokens import TokenError, load_token, secret_name

TOKEN_ENV = "DORAFORGE_GATEWAY_TOKEN"
TOKEN_FILE_ENV = "DORAFORGE_GATEWAY_TOKEN_FILE"


def operator_token(environ: Mapping[str, str]) -> str | None:
    """The token ``DORAFORGE_GATEWAY_TOKEN`` or the file ``DORAFORGE_GATEWAY_TOKEN_FILE``
    holds, else ``None``. Raises :class:`~doraforge.wire.tokens.TokenError` for both set,
    or a short, unreadable or group/world-readable token."""
    if environ.get(TOKEN_ENV) and environ.get(TOKEN_FILE_ENV):
        raise TokenError(f"set either {TOKEN_ENV} or {TOKEN_FILE_ENV}, not both")
    return load_token(
        env=TOKEN_ENV if environ.get(TOKEN_ENV) else None,
        file=environ.get(TOKEN_FILE_ENV) or None,
        environ=environ,
    )


def bearer(token: str | None) -> dict[str, str]:
    """The ``Authorization`` header for ``token`` (empty without one)."""
    return {"Authorization": f"Bearer {token}"} if token else {}


def http_client(base_url: str, token: str | None, *, timeout_s: float = 10.0) -> httpx.Client:
    """A plain httpx client of one Gateway that presents ``token`` on every request."""
    return httpx.Client(base_url=base_url, timeout=timeout_s, headers=bearer(token))


@dataclass(frozen=True)
class DataflowAuth:
    """How a ``dora run`` dataflow's Gateway authenticates callers.

    ``token`` is what clients present (``None``: the Gateway takes none); ``mode`` says so
    in one line for the operator; :meth:`environment` is the dataflow's environment.
    """

    mode: str
    token: str | None = field(default=None, repr=False)
    token_file: Path | None = None

    def environment(self, base: Mapping[str, str]) -> dict[str, str]:
        """``base`` with the Gateway pointed at :attr:`token_file` and every token variable
        removed (the registry's and the operator's included): the nodes need the file,
        never a secret in their environment."""
        env = {k: v for k, v in base.items() if not secret_name(k)}
        if self.token_file is not None:
            env[TOKEN_FILE_ENV] = str(self.token_file)
        return env


@contextlib.contextmanager
def dataflow_auth(environ: Mapping[str, str], *, generate: bool = False) -> Iterator[DataflowAuth]:
    """The Gateway token of one ``dora run``, for as long as the block runs.

    ``generate`` makes a fresh random token (the demos: secure by default). Otherwise a
    ``DORAFORGE_GATEWAY_TOKEN_FILE`` is used as it is, a ``DORAFORGE_GATEWAY_TOKEN`` value
    is written to a private 0600 file (in a 0700 temporary directory) removed when the
    block ends, and with neither the Gateway runs without a token (loopback only). Raises
    :class:`~doraforge.wire.tokens.TokenError` before anything starts for a bad token.
    """
    if generate:
        token = secrets.token_urlsafe(32)
        mode = "bearer token generated for this run"
    else:
        configured = operator_token(environ)
        if configured is None:
            yield DataflowAuth("no token: loopback only, any local process may call it")
            return
        token = configured
        if not environ.get(TOKEN_ENV):
            path = Path(environ[TOKEN_FILE_ENV])
            yield DataflowAuth(f"bearer token from ${TOKEN_FILE_ENV} ({path})", token, path)
            return
        mode = f"bearer token from ${TOKEN_ENV}"
    with _private_token_file(token) as path:
        yield DataflowAuth(mode, token, path)


@contextlib.contextmanager
def _private_token_file(token: str) -> Iterator[Path]:
    """``token`` in a new 0600 file inside a new 0700 directory, both removed after."""
    private = Path(tempfile.mkdtemp(prefix="doraforge-token-"))
    try:
        path = private / "gateway.token"
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            handle.write(token + "\n")
        yield path
    finally:
        shutil.rmtree(private, ignore_errors=True)
