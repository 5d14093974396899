"""The ``doraforge`` argument parser class: a refused command line is one error line.

Every parser and subparser of ``doraforge`` is a :class:`Parser` (argparse builds
subparsers of the parent's class), so a missing option value, an unknown choice or a bad
argument type prints ``doraforge: CLI_USAGE: <what>; run `<command> --help``` and exits 2,
with no usage block.
"""

from __future__ import annotations

import argparse
import re
import sys
from typing import NoReturn

from doraforge.wire.suggest import did_you_mean

EXIT_USAGE = 2
_INVALID_CHOICE = re.compile(r"invalid choice: '([^']*)' \(choose from (.*)\)")


def usage_line(message: str, prog: str) -> str:
    """The one error line of a refused command line of ``prog`` (``doraforge skill start``)."""
    text = " ".join(message.split())
    if choice := _INVALID_CHOICE.search(text):  # a typo of a command: offer the closest
        text += did_you_mean(choice.group(1), re.findall(r"'([^']*)'", choice.group(2)))
    return f"doraforge: CLI_USAGE: {text}; run `{prog} --help`"


class Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose refusals follow the CLI's one error format."""

    def error(self, message: str) -> NoReturn:
        print(usage_line(message, self.prog), file=sys.stderr)
        sys.exit(EXIT_USAGE)
