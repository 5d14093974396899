"""``doraforge approvals list|approve|deny``: decide high-risk agent calls that wait.

The commands talk to a running ``doraforge serve`` over its HTTP API (``/api/approvals``)
at ``--url`` or ``--port``, else ``$DORAFORGE_REGISTRY_URL``, else the serve running for
this home (its ``serve.json``), presenting the operator's bearer token as
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
from typing import Any
from urllib.parse import quote

from doraforge.cli import registry_client
from doraforge.cli.context import Context
from doraforge.cli.registry_client import (
    DEFAULT_TOKEN_ENV,
    OPERATOR_TOKEN_ENV,
    RegistryFailure,
    connection_options,
    registry_url,
    token,
)

#: The failure of every approvals command (the registry client's).
ApprovalsFailure = RegistryFailure
__all__ = ["DEFAULT_TOKEN_ENV", "OPERATOR_TOKEN_ENV", "ApprovalsFailure", "request", "token"]

STATES = ("pending", "approved", "denied", "expired", "withdrawn")
MAX_ARGUMENTS_CHARS = 120
_HINTS = {404: " (list them with `doraforge approvals list`)"}


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    approvals = commands.add_parser(
        "approvals",
        help="list, approve or deny high-risk agent calls waiting for an operator",
        description="Decide high-risk calls waiting in a running `doraforge serve`.",
    )
    sub = approvals.add_subparsers(dest="approvals_command", required=True)
    listing = sub.add_parser("list", help="approvals, pending first")
    listing.add_argument("--state", choices=STATES, default=None, help="only this state")
    connection_options(listing)
    listing.set_defaults(handler=_list)
    for name, verb in (("approve", "approve"), ("deny", "deny")):
        decide = sub.add_parser(name, help=f"{verb} the one waiting call an approval is bound to")
        decide.add_argument("id", help="the approval id (apr_…, from `approvals list`)")
        decide.add_argument("--reason", required=True, help="why (the agent is told on deny)")
        connection_options(decide)
        decide.set_defaults(handler=_decide, decision=name)


def request(url: str, method: str, path: str, **options: Any) -> Any:
    """One call to the registry's approvals API (:func:`registry_client.request` with
    this command's hints)."""
    return registry_client.request(url, method, path, hints=_HINTS, **options)


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
    parts = [record.get("id"), record.get("state"), record.get("tool"), record.get("caller")]
    cell = record.get("cell")
    if isinstance(cell, dict) and cell.get("skill"):
        # A lab of cells behind one registry: the operator must see which robot moves.
        parts.append(f"cell={cell['skill']}" + (f"/{cell['robot']}" if cell.get("robot") else ""))
    return f"{' '.join(str(p) for p in parts)} {when} {arguments}"


def _url(ctx: Context, args: argparse.Namespace) -> str:
    return registry_url(ctx.home, ctx.environ, args)


def _bearer(ctx: Context, args: argparse.Namespace) -> str | None:
    return token(ctx.environ, args.token_env, args.token_file)


def _list(ctx: Context, args: argparse.Namespace) -> int:
    params = {} if args.state is None else {"state": args.state}
    try:
        bearer = _bearer(ctx, args)
        body = request(_url(ctx, args), "GET", "/api/approvals", bearer=bearer, params=params)
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
        bearer = _bearer(ctx, args)
        record = request(_url(ctx, args), "POST", path, bearer=bearer, body={"reason": args.reason})
    except ApprovalsFailure as failure:
        ctx.out.fail(str(failure))
        return 1
    if ctx.out.as_json:
        ctx.out.data(record)
    else:
        print(f"{record.get('state')} {record.get('id')} ({record.get('tool')}): {args.reason}")
    return 0
