"""Relative-path safety shared by the manifest and the archive code.

A bundle path is untrusted text that will be joined to a directory we own. It is accepted
only in one canonical spelling: POSIX separators, no empty, ``.`` or ``..`` components, not
absolute, no drive letter, no backslash (a separator on Windows, so ``a\\..\\b`` would
escape there), no NUL (C APIs truncate at it, so the name checked is not the name opened)
and no other Unicode control, format or line/paragraph separator character (categories
Cc, Cf, Zl, Zp): C1 controls such as U+009B open terminal escape sequences, U+202E
reverses how a name is displayed (``evil\\u202etxt.sh`` reads as ``evilhs.txt``) and
U+200B makes two names that look identical differ. With those rules a
path's components are its resolved components as long as nothing on the way is a link,
which the extractor guarantees by never creating links and opening with ``O_NOFOLLOW``.
"""

from __future__ import annotations

import re
import unicodedata
from enum import StrEnum

#: Longest accepted relative path, in characters (Linux PATH_MAX is 4096 bytes).
MAX_PATH_CHARS = 1024

_DRIVE = re.compile(r"^[A-Za-z]:")
#: Unicode general categories refused anywhere in a path: controls (C0, DEL, C1), format
#: characters (bidi overrides, zero-width characters, BOM), line and paragraph separators.
CONTROL_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp"})


class PathProblem(StrEnum):
    """Why a relative path is unsafe; the archive code maps each to an error code."""

    EMPTY = "empty"
    NUL = "nul"
    BACKSLASH = "backslash"
    ABSOLUTE = "absolute"
    DRIVE = "drive"
    TRAVERSAL = "traversal"
    CONTROL = "control"
    INVALID = "invalid"


def path_problem(path: str) -> PathProblem | None:
    """The first rule ``path`` breaks, or ``None`` when it is a safe relative path."""
    if not path:
        return PathProblem.EMPTY
    if "\x00" in path:
        return PathProblem.NUL
    if "\\" in path:
        return PathProblem.BACKSLASH
    if path.startswith("/"):
        return PathProblem.ABSOLUTE
    if _DRIVE.match(path):
        return PathProblem.DRIVE
    parts = path.split("/")
    if ".." in parts:
        return PathProblem.TRAVERSAL
    if "" in parts or "." in parts:
        return PathProblem.EMPTY
    if len(path) > MAX_PATH_CHARS or not _encodable(path):
        return PathProblem.INVALID
    if control_character(path) is not None:
        return PathProblem.CONTROL
    return None


_DESCRIPTIONS = {
    PathProblem.EMPTY: "is empty or has an empty or '.' component",
    PathProblem.NUL: "contains a NUL character",
    PathProblem.BACKSLASH: "contains a backslash",
    PathProblem.ABSOLUTE: "is absolute",
    PathProblem.DRIVE: "starts with a drive letter",
    PathProblem.TRAVERSAL: "has a '..' component",
    PathProblem.CONTROL: "contains a Unicode control or format character",
    PathProblem.INVALID: "is too long or is not valid UTF-8",
}


def control_character(path: str) -> str | None:
    """The first character of ``path`` in :data:`CONTROL_CATEGORIES`, or ``None``."""
    return next((c for c in path if unicodedata.category(c) in CONTROL_CATEGORIES), None)


def printable(path: str) -> str:
    """``path`` with every control or format character spelled ``\\uXXXX``, for messages."""
    return "".join(
        f"\\u{ord(c):04x}" if unicodedata.category(c) in CONTROL_CATEGORIES else c for c in path
    )


def describe(problem: PathProblem) -> str:
    """A phrase completing "the path ...", for error messages."""
    return _DESCRIPTIONS[problem]


def check_relative_path(path: str) -> str:
    """Return ``path`` when safe; raise ``ValueError`` saying why not (pydantic validator)."""
    problem = path_problem(path)
    if problem is not None:
        raise ValueError(f"unsafe relative path {path!r}: it {describe(problem)}")
    return path


def _encodable(path: str) -> bool:
    # tarfile decodes undecodable bytes as lone surrogates; they cannot be written back
    # as UTF-8, and two different byte names could otherwise map to one text name.
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
