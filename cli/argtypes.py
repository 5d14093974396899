"""Argument types shared by the CLI's commands (argparse ``type=`` callables).

Each turns one command-line word into a value or raises ``argparse.ArgumentTypeError``
with a message that names the word, which argparse prints as a one-line usage error.
Imports stay light: every ``doraforge`` invocation builds the parsers that use them.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from doraforge.skill_runtime.cluster import CoordinatorAddress


def tcp_port(text: str) -> int:
    """A TCP port, 1-65535."""
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 0 < port < 65536:
        raise argparse.ArgumentTypeError(f"{text!r} is not a TCP port (1-65535)")
    return port


def coordinator_address(text: str) -> CoordinatorAddress:
    """A running Dora coordinator's ``HOST:PORT``."""
    from doraforge.skill_runtime.cluster import CoordinatorAddress

    try:
        return CoordinatorAddress.parse(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc
