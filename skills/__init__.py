"""The shipped example skill bundles (package data), e.g. ``pick-place``."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

_ROOT = Path(str(files(__name__)))


def source(name: str) -> Path:
    """The source folder of the shipped skill ``name`` (``pick-place``)."""
    return _ROOT / name


def names() -> list[str]:
    """The shipped example skills by name: every folder here with a ``skill.yaml``."""
    return sorted(path.parent.name for path in _ROOT.glob("*/skill.yaml"))
