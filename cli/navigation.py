"""The CLI's commands as navigation entries, walked from the real ``doraforge`` parser.

Every command and subcommand the parser accepts becomes one entry: its route is the
command line that runs it (``doraforge skill start``), its label the same, its
description the parser's help, its aliases the other names argparse accepts for it, and
its sections the subcommands of a command group. Nothing is listed by hand, so a
command added to the parser is navigable at once.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator

from doraforge.registry.context.scopes import NavigationEntry

PROGRAM = "doraforge"


def _subcommands(
    parser: argparse.ArgumentParser,
) -> Iterator[tuple[str, tuple[str, ...], str, argparse.ArgumentParser]]:
    """``(name, aliases, help, parser)`` of each direct subcommand of ``parser``."""
    for action in parser._actions:
        if not isinstance(action, argparse._SubParsersAction):
            continue
        helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
        names: dict[int, list[str]] = {}
        for name, child in action.choices.items():
            names.setdefault(id(child), []).append(name)
        for child in dict.fromkeys(action.choices.values()):
            first, *aliases = names[id(child)]
            yield first, tuple(aliases), helps.get(first, ""), child


def _walk(parser: argparse.ArgumentParser, path: tuple[str, ...]) -> Iterator[NavigationEntry]:
    for name, aliases, help_text, child in _subcommands(parser):
        route = " ".join((PROGRAM, *path, name))
        children = tuple(sub for sub, *_ in _subcommands(child))
        yield NavigationEntry(
            kind="command",
            label=route,
            route=route,
            description=" ".join(t for t in (help_text, child.description or "") if t),
            aliases=(
                " ".join((*path, name)),
                *(" ".join((PROGRAM, *path, alias)) for alias in aliases),
            ),
            sections=children,
        )
        yield from _walk(child, (*path, name))


def entries(parser: argparse.ArgumentParser | None = None) -> tuple[NavigationEntry, ...]:
    """Every command of ``parser`` (default: the ``doraforge`` parser), depth first."""
    if parser is None:
        from doraforge.cli import build_parser

        parser = build_parser()
    return tuple(_walk(parser, ()))
