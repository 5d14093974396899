"""The ``doraforge`` parser class: a refused command line (missing value, unknown choice,
bad type) is one ``CLI_USAGE: <what>; run `<command> --help``` line and exit 2, no usage
block; argparse builds every subparser of the parent's class."""

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
