"""The shipped example skill bundles (package data), e.g. ``pick-place``."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path


def source(name: str) -> Path:
    """The source folder of the shipped skill ``name`` (``pick-place``)."""
    return Path(str(files(__name__))) / name
