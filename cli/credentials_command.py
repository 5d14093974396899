"""``doraforge credentials set|list|delete``: the named credentials API tools use.

The commands talk to a running ``doraforge serve`` (``/api/credentials``, operator-only) at
``--url`` with the operator's token as ``serve`` reads it (``cli.registry_client``). ``set``
reads the value from standard input (its first line, without the line break) so it never
lands in the shell history or the process list; nothing prints a value, ever. Every failure
is one line with a code and exit status 1.
"""

from __future__ import annotations

import argparse
import getpass
import sys
from typing import Any, TextIO
from urllib.parse import quote

from doraforge.cli import registry_client
from doraforge.cli.context import Context
from doraforge.cli.registry_client import RegistryFailure, connection_options, token

_HINTS = {404: " (list them with `doraforge credentials list`)"}


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    credentials = commands.add_parser(
        "credentials",
        help="set, list or delete the named credentials API tools reference",
        description="Manage the credentials of a running `doraforge serve` (values write-only).",
    )
    sub = credentials.add_subparsers(dest="credentials_command", required=True)
    setting = sub.add_parser("set", help="set NAME to the value read from standard input")
    setting.add_argument("name", help="the credential's name, as bundles write {{secret:NAME}}")
    listing = sub.add_parser("list", help="names, scopes and when each was set (never values)")
    deleting = sub.add_parser("delete", help="forget NAME")
    deleting.add_argument("name")
    for parser, handler in ((setting, _set), (listing, _list), (deleting, _delete)):
        connection_options(parser)
        parser.set_defaults(handler=handler)


def read_value(stream: TextIO) -> str:
    """The first line of ``stream`` without its line break (``""`` when there is none)."""
    return stream.readline().rstrip("\r\n")


def _call(ctx: Context, args: argparse.Namespace, method: str, path: str, **extra: Any) -> Any:
    bearer = token(ctx.environ, args.token_env, args.token_file)
    url = registry_client.registry_url(ctx.home, ctx.environ, args)
    return registry_client.request(url, method, path, bearer=bearer, hints=_HINTS, **extra)


def _run(ctx: Context, work: Any) -> int:
    try:
        body = work()
    except RegistryFailure as failure:
        ctx.out.fail(str(failure))
        return 1
    if ctx.out.as_json:
        ctx.out.data(body)
    return 0


def _set(ctx: Context, args: argparse.Namespace) -> int:
    # At a terminal the value is typed without echo; piped, it is the first line.
    tty = sys.stdin.isatty()
    value = getpass.getpass(f"value for {args.name}: ") if tty else read_value(sys.stdin)
    path = f"/api/credentials/{quote(args.name, safe='')}"
    status = _run(ctx, lambda: _call(ctx, args, "PUT", path, body={"value": value}))
    if status == 0 and not ctx.out.as_json:
        print(f"credential {args.name} set")
    return status


def _list(ctx: Context, args: argparse.Namespace) -> int:
    rows: list[dict[str, Any]] = []

    def work() -> Any:
        body = _call(ctx, args, "GET", "/api/credentials")
        rows.extend(body.get("credentials", []) if isinstance(body, dict) else [])
        return body

    status = _run(ctx, work)
    if status == 0 and not ctx.out.as_json:
        for row in rows:
            print(f"{row.get('name')} {row.get('scope')} set {row.get('setAt')}")
        if not rows:
            ctx.out.say("no credentials")
    return status


def _delete(ctx: Context, args: argparse.Namespace) -> int:
    path = f"/api/credentials/{quote(args.name, safe='')}"
    status = _run(ctx, lambda: _call(ctx, args, "DELETE", path))
    if status == 0 and not ctx.out.as_json:
        print(f"credential {args.name} deleted")
    return status
