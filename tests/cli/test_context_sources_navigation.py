"""The CLI's navigation entries are walked from a parser: every command at any depth,
its help as the description, argparse's aliases, and a group's subcommands."""

from __future__ import annotations

import argparse

from doraforge.cli.navigation import entries


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="doraforge")
    commands = parser.add_subparsers(dest="command")
    skill = commands.add_parser("skill", help="skill bundles", aliases=["skills"])
    actions = skill.add_subparsers(dest="action")
    actions.add_parser("start", help="start the runtime", description="Starts it on Dora.")
    actions.add_parser("remove", help="remove it", aliases=["rm"])
    commands.add_parser("doctor", help="check the machine")
    return parser


def test_every_command_at_any_depth_is_one_entry_in_parser_order() -> None:
    routes = [entry.route for entry in entries(_parser())]
    assert routes == [
        "doraforge skill",
        "doraforge skill start",
        "doraforge skill remove",
        "doraforge doctor",
    ]


def test_an_entry_carries_help_aliases_and_subcommands() -> None:
    by_route = {entry.route: entry for entry in entries(_parser())}
    group = by_route["doraforge skill"]
    assert group.kind == "command"
    assert group.aliases == ("skill", "doraforge skills")
    assert group.sections == ("start", "remove")
    start = by_route["doraforge skill start"]
    assert start.description == "start the runtime Starts it on Dora."
    assert start.sections == ()
    assert by_route["doraforge skill remove"].aliases == ("skill remove", "doraforge skill rm")


def test_the_default_parser_is_doraforges_own() -> None:
    routes = {entry.route for entry in entries()}
    assert {"doraforge serve", "doraforge skill start", "doraforge task get"} <= routes
