"""The one place a failed command becomes its line ``CODE: what happened; what to do``:
a few codes get the next command added here, where the command line is known; an OS or
value error gets a code from its class."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from doraforge.wire.errors import StructuredError

type Hint = Callable[[argparse.Namespace], str]

#: Codes for errors that are not doraforge's own, by class (the first that matches).
FOREIGN_CODES: tuple[tuple[type[BaseException], str], ...] = (
    (FileNotFoundError, "FILE_NOT_FOUND"),
    (PermissionError, "PERMISSION_DENIED"),
    (IsADirectoryError, "IS_A_DIRECTORY"),
    (TimeoutError, "TIMEOUT"),
    (OSError, "OS_ERROR"),
    (ValueError, "INVALID_VALUE"),
)


def where(args: argparse.Namespace) -> str:
    """The ``--skill``/``--gateway`` words of a tools command, as the user gave them."""
    if getattr(args, "skill", None):
        return f"--skill {args.skill}"
    if getattr(args, "gateway", None):
        return f"--gateway {args.gateway}"
    return ""


def _tools_list(args: argparse.Namespace) -> str:
    return f"list the tools with `{f'doraforge tools list {where(args)}'.strip()}`"


def _describe(args: argparse.Namespace) -> str:
    tool = getattr(args, "tool_id", None) or "TOOL"
    return (
        f"see its input schema and an example with `doraforge tools describe {tool} {where(args)}`"
    )


def _unreachable(args: argparse.Namespace) -> str:
    if getattr(args, "gateway", None):
        return f"check that a Gateway runs at {args.gateway}"
    return "check where the skills run with `doraforge skill status`"


def _busy(_args: argparse.Namespace) -> str:
    return (
        "a call already running holds it: try again once that ends, or cancel that call "
        "(Ctrl-C where it was started, or Cancel on the console's Cell page)"
    )


#: What to do next after a refusal with this code (or with this provider code behind the
#: Gateway's own), when the message does not say it.
HINTS: dict[str, Hint] = {
    "FORGE_TOOL_NOT_FOUND": _tools_list,
    "FORGE_TOOL_INVALID_ARGUMENTS": _describe,
    "FORGE_CLIENT_TRANSPORT": _unreachable,
    "FORGE_CLIENT_TIMEOUT": _unreachable,
    "FORGE_TOOL_GATEWAY_BUSY": _busy,
    "FORGE_ENDPOINT_CAPACITY": _busy,
}


def line(exc: BaseException, args: argparse.Namespace | None = None) -> str:
    """The error line of ``exc`` (without the ``doraforge:`` prefix the output adds)."""
    if isinstance(exc, StructuredError):
        hint = HINTS.get(exc.code) or HINTS.get(str(exc.details.get("provider_code")))
        extra = f"; {hint(args)}" if hint is not None and args is not None else ""
        return f"{exc.code}: {exc.message}{extra}"
    code = next(code for kind, code in FOREIGN_CODES if isinstance(exc, kind))
    return f"{code}: {str(exc) or type(exc).__name__}"
