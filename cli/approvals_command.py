"""``doraforge approvals list|approve|deny``: decide high-risk agent calls that wait.

The commands talk to a running ``doraforge serve`` over its HTTP API (``/api/approvals``)
at ``--url`` (default ``http://127.0.0.1:8765``), presenting the operator's bearer token as
``serve`` reads it: ``--token-env VAR`` or ``--token-file PATH`` (0600), else
``$DORAFORGE_OPERATOR_TOKEN`` when set, else ``$DORAFORGE_REGISTRY_TOKEN`` when set (a
server started without ``--operator-token-*`` takes its one token for deciding too).
Every approval or denial needs ``--reason``; the agent whose call is denied receives it.
Output is one line per approval (``--json``: the registry's records); every failure is
one line with a code and exit status 1.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx

from doraforge.cli.context import Context
from doraforge.wire.tokens import TokenError, load_token

DEFAULT_URL = "http://127.0.0.1:8765"
DEFAULT_TOKEN_ENV = "DORAFORGE_REGISTRY_TOKEN"
OPERATOR_TOKEN_ENV = "DORAFORGE_OPERATOR_TOKEN"
#: Tried in this order when neither --token-env nor --token-file is given.
DEFAULT_TOKEN_ENVS = (OPERATOR_TOKEN_ENV, DEFAULT_TOKEN_ENV)
STATES = ("pending", "approved", "denied", "expired", "withdrawn")
TIMEOUT_S = 10.0
MAX_ARGUMENTS_CHARS = 120


class ApprovalsFailure(Exception):
    """A refusal or an unreachable registry, already phrased as ``CODE: what to do``."""


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    approvals = commands.add_parser(
        "approvals",
        help="list, approve or deny high-risk agent calls waiting for an operator",
        description="Decide high-risk calls waiting in a running `doraforge serve`.",
    )
    sub = approvals.add_subparsers(dest="approvals_command", required=True)
    listing = sub.add_parser("list", help="approvals, pending first")
    listing.add_argument("--state", choices=STATES, default=None, help="only this state")
    _connection_options(listing)
    listing.set_defaults(handler=_list)
    for name, verb in (("approve", "approve"), ("deny", "deny")):
        decide = sub.add_parser(name, help=f"{verb} the one waiting call an approval is bound to")
        decide.add_argument("id", help="the approval id (apr_…, from `approvals list`)")
        decide.add_argument("--reason", required=True, help="why (the agent is told on deny)")
        _connection_options(decide)
        decide.set_defaults(handler=_decide, decision=name)


def _connection_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--url", default=DEFAULT_URL, help=f"the registry's address (default {DEFAULT_URL})"
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


def token(environ: Mapping[str, str], token_env: str | None, token_file: Path | None) -> str | None:
    """The bearer token as ``serve`` reads it; when neither option is given, the first of
    :data:`DEFAULT_TOKEN_ENVS` that is set (the operator's token before the agents' one).
    Raises :class:`ApprovalsFailure` for an unusable one."""
    if token_env is None and token_file is None:
        token_env = next((name for name in DEFAULT_TOKEN_ENVS if environ.get(name)), None)
    try:
        return load_token(env=token_env, file=token_file, environ=environ)
    except TokenError as exc:
        raise ApprovalsFailure(f"REGISTRY_TOKEN_INVALID: {exc}") from exc


def request(
    url: str,
    method: str,
    path: str,
    *,
    bearer: str | None,
    body: Any = None,
    params: Mapping[str, str] | None = None,
    transport: httpx.BaseTransport | None = None,
) -> Any:
    """One call to the registry's approvals API; its JSON answer, or
    :class:`ApprovalsFailure` naming the registry's error code (or why nobody answered)."""
    headers = {} if bearer is None else {"Authorization": f"Bearer {bearer}"}
    try:
        with httpx.Client(
            base_url=url, headers=headers, timeout=TIMEOUT_S, transport=transport
        ) as client:
            answer = client.request(method, path, json=body, params=params)
    except httpx.InvalidURL as exc:
        raise ApprovalsFailure(f"REGISTRY_URL_INVALID: {url!r} is not an http(s) URL") from exc
    except httpx.HTTPError as exc:
        raise ApprovalsFailure(
            f"REGISTRY_UNREACHABLE: no registry answers at {url} ({type(exc).__name__}); "
            "start `doraforge serve` or pass --url"
        ) from exc
    return _answer(answer, url)


def _answer(answer: httpx.Response, url: str) -> Any:
    try:
        body = answer.json()
    except ValueError:
        body = None
    if answer.is_success and body is not None:
        return body
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict):
        raise ApprovalsFailure(
            f"REGISTRY_BAD_ANSWER: {url} answered HTTP {answer.status_code} without a "
            "registry error; is it a `doraforge serve`?"
        )
    code, message = error.get("code"), error.get("message")
    hint = _HINTS.get(answer.status_code, "") if code != "OPERATOR_REQUIRED" else _HINTS[401]
    raise ApprovalsFailure(f"{code}: {message}{hint}")


_HINTS = {
    401: f" (set ${OPERATOR_TOKEN_ENV}, --token-env or --token-file to the operator's token; "
    f"${DEFAULT_TOKEN_ENV} when serve has no operator token)",
    404: " (list them with `doraforge approvals list`)",
}


def line(record: Mapping[str, Any]) -> str:
    """One approval on one line: id, state, tool, caller, the deadline or the reason, and
    the arguments (credential-looking values already masked by the registry)."""
    arguments = json.dumps(record.get("arguments"), separators=(",", ":"), ensure_ascii=False)
    if len(arguments) > MAX_ARGUMENTS_CHARS:
        arguments = arguments[: MAX_ARGUMENTS_CHARS - 1] + "…"
    if record.get("state") == "pending":
        when = f"expires {record.get('expires_at')}"
    else:
        when = f"{record.get('decided_at')} {' '.join(str(record.get('reason')).split())!r}"
    parts = (record.get("id"), record.get("state"), record.get("tool"), record.get("caller"))
    return f"{' '.join(str(p) for p in parts)} {when} {arguments}"


def _bearer(ctx: Context, args: argparse.Namespace) -> str | None:
    return token(ctx.environ, args.token_env, args.token_file)


def _list(ctx: Context, args: argparse.Namespace) -> int:
    params = {} if args.state is None else {"state": args.state}
    try:
        body = request(args.url, "GET", "/api/approvals", bearer=_bearer(ctx, args), params=params)
    except ApprovalsFailure as failure:
        ctx.out.fail(str(failure))
        return 1
    records = body.get("approvals", []) if isinstance(body, dict) else []
    if ctx.out.as_json:
        ctx.out.data(body)
    elif not records:
        ctx.out.say(f"no {args.state or ''} approvals".replace("  ", " "))
    for record in [] if ctx.out.as_json else records:
        print(line(record))
    return 0


def _decide(ctx: Context, args: argparse.Namespace) -> int:
    if not args.reason.strip():
        ctx.out.fail("APPROVAL_REASON_REQUIRED: give --reason with why you decide so")
        return 1
    path = f"/api/approvals/{quote(args.id, safe='')}/{args.decision}"
    try:
        record = request(
            args.url, "POST", path, bearer=_bearer(ctx, args), body={"reason": args.reason}
        )
    except ApprovalsFailure as failure:
        ctx.out.fail(str(failure))
        return 1
    if ctx.out.as_json:
        ctx.out.data(record)
    else:
        print(f"{record.get('state')} {record.get('id')} ({record.get('tool')}): {args.reason}")
    return 0
