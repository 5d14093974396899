"""Talking to a running ``doraforge serve`` from an operator command (``approvals``,
``recipes``, ``credentials``): its address (``--url``/``--port``, ``$DORAFORGE_REGISTRY_URL``,
else the home's running serve) and token options, the token as ``serve`` reads it, and one
request whose failure is already the one line ``CODE: what to do``, naming the registry.

The token comes from ``--token-env VAR`` or ``--token-file PATH`` (0600), else
``$DORAFORGE_OPERATOR_TOKEN`` when set, else ``$DORAFORGE_REGISTRY_TOKEN`` when set (a
server started without ``--operator-token-*`` takes its one token for operators too).
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx

from doraforge.cli import serve_state
from doraforge.cli.argtypes import tcp_port
from doraforge.paos.home import PaosHome
from doraforge.wire.tokens import TokenError, load_token

#: The registry's address when neither --url nor --port is given.
URL_ENV = "DORAFORGE_REGISTRY_URL"
DEFAULT_TOKEN_ENV = "DORAFORGE_REGISTRY_TOKEN"
OPERATOR_TOKEN_ENV = "DORAFORGE_OPERATOR_TOKEN"
#: Tried in this order when neither --token-env nor --token-file is given.
DEFAULT_TOKEN_ENVS = (OPERATOR_TOKEN_ENV, DEFAULT_TOKEN_ENV)
TIMEOUT_S = 10.0
#: Said after a refusal of the operator's credential, whichever command was refused.
TOKEN_HINT = (
    f" (set ${OPERATOR_TOKEN_ENV}, --token-env or --token-file to the operator's token; "
    f"${DEFAULT_TOKEN_ENV} when serve has no operator token)"
)


class RegistryFailure(Exception):
    """A refusal or an unreachable registry, already phrased as ``CODE: what to do``."""


def connection_options(parser: argparse.ArgumentParser) -> None:
    """``--url``/``--port``, ``--token-env`` and ``--token-file`` on ``parser``."""
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "--url",
        default=None,
        help=f"the registry's address (default ${URL_ENV}, else the home's running "
        "`doraforge serve`)",
    )
    where.add_argument(
        "--port", type=tcp_port, default=None, help="the registry's port on 127.0.0.1"
    )
    parser.add_argument(
        "--token-env",
        default=None,
        metavar="VAR",
        help=f"environment variable with the operator's token (default ${OPERATOR_TOKEN_ENV}, "
        f"else ${DEFAULT_TOKEN_ENV}, when set)",
    )
    parser.add_argument(
        "--token-file", type=Path, default=None, metavar="PATH", help="file (0600) with the token"
    )


def registry_url(home: PaosHome, environ: Mapping[str, str], args: argparse.Namespace) -> str:
    """The registry to dial: ``--url``, ``--port``, ``$DORAFORGE_REGISTRY_URL``, else the
    running ``doraforge serve`` of ``home`` (its ``serve.json``, while its process lives).
    Raises :class:`RegistryFailure` ``REGISTRY_NOT_RUNNING`` when none of them names one."""
    if args.url:
        return str(args.url)
    if args.port is not None:
        return f"http://127.0.0.1:{args.port}"
    if environ.get(URL_ENV):
        return environ[URL_ENV]
    record = serve_state.running(home)
    if record is None:
        raise RegistryFailure(
            f"REGISTRY_NOT_RUNNING: no `doraforge serve` is running for the home {home.root}; "
            f"start it with `doraforge serve --home {home.root}`, or name another registry "
            f"with --url, --port or ${URL_ENV}"
        )
    return record.url


def token(environ: Mapping[str, str], token_env: str | None, token_file: Path | None) -> str | None:
    """The bearer token as ``serve`` reads it; when neither option is given, the first of
    :data:`DEFAULT_TOKEN_ENVS` that is set (the operator's token before the agents' one).
    Raises :class:`RegistryFailure` for an unusable one."""
    if token_env is None and token_file is None:
        token_env = next((name for name in DEFAULT_TOKEN_ENVS if environ.get(name)), None)
    try:
        return load_token(env=token_env, file=token_file, environ=environ)
    except TokenError as exc:
        raise RegistryFailure(f"REGISTRY_TOKEN_INVALID: {exc}") from exc


def request(
    url: str,
    method: str,
    path: str,
    *,
    bearer: str | None,
    body: Any = None,
    params: Mapping[str, str] | None = None,
    hints: Mapping[int, str] | None = None,
    transport: httpx.BaseTransport | None = None,
) -> Any:
    """One call to the registry; its JSON answer, or :class:`RegistryFailure` naming the
    registry's error code (or why nobody answered). ``hints`` add what to do after a
    refusal of a given status; a refused credential always says where the token goes."""
    headers = {} if bearer is None else {"Authorization": f"Bearer {bearer}"}
    try:
        with httpx.Client(
            base_url=url, headers=headers, timeout=TIMEOUT_S, transport=transport
        ) as client:
            answer = client.request(method, path, json=body, params=params)
    except httpx.InvalidURL as exc:
        raise RegistryFailure(f"REGISTRY_URL_INVALID: {url!r} is not an http(s) URL") from exc
    except httpx.HTTPError as exc:
        raise RegistryFailure(
            f"REGISTRY_UNREACHABLE: no registry answers at {url} ({type(exc).__name__}); "
            "start `doraforge serve` or pass --url"
        ) from exc
    return _answer(answer, url, hints or {})


def _answer(answer: httpx.Response, url: str, hints: Mapping[int, str]) -> Any:
    try:
        body = answer.json()
    except ValueError:
        body = None
    if answer.is_success and body is not None:
        return body
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict):
        raise RegistryFailure(
            f"REGISTRY_BAD_ANSWER: {url} answered HTTP {answer.status_code} without a "
            "registry error; is it a `doraforge serve`?"
        )
    code, message = error.get("code"), error.get("message")
    credential = answer.status_code == 401 or code == "OPERATOR_REQUIRED"
    hint = TOKEN_HINT if credential else hints.get(answer.status_code, "")
    # The address: with several registries about, the operator sees which one refused.
    raise RegistryFailure(f"{code}: {message} (registry at {url}){hint}")
