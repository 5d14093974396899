"""Closest-name suggestions for a misspelled tool, skill or command (one rule, difflib)."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

#: How alike a name must be to be offered (difflib's ratio, 0..1).
CUTOFF = 0.75
MOST = 3


def closest(name: str, choices: Iterable[str]) -> list[str]:
    """Up to :data:`MOST` of ``choices`` most like ``name``, best first (may be empty)."""
    return difflib.get_close_matches(name, sorted(set(choices)), n=MOST, cutoff=CUTOFF)


def did_you_mean(name: str, choices: Iterable[str]) -> str:
    """``"; did you mean 'arm.home'?"`` to append to a message, or ``""`` when nothing is
    close enough to offer."""
    return offered(closest(name, choices))


def offered(found: Iterable[str]) -> str:
    """``"; did you mean 'a' or 'b'?"`` for names already found, ``""`` for none."""
    shown = [repr(choice) for choice in found]
    return f"; did you mean {' or '.join(shown)}?" if shown else ""
