"""The context sources ``doraforge serve`` offers agents (skeleton: implemented by the
context-sources work): one per scope, over the PAOS home, the runtime, the console's pages
and this CLI's commands."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from doraforge.cli.context import Context
    from doraforge.registry.context.source import ContextSource, Scope


def build(ctx: Context) -> dict[Scope, ContextSource]:
    """Every scope's source for the server ``ctx`` serves."""
    return {}
