"""The shipped dataflows (package data): development and demo cells for ``dora run``.

Found through :mod:`importlib.resources`, so they are where the installed package is, in a
checkout and in a wheel alike.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

#: The folder holding ``mock.yml``, ``sim.yml``, their Gateway configs and the overlay.
DATAFLOWS = Path(str(files(__name__)))
#: The Zenoh overlay every doraforge Dora process runs with (no silent drops under bursts).
ZENOH_OVERLAY = DATAFLOWS / "zenoh-overlay.json5"


def dataflow(name: str) -> Path:
    """The shipped dataflow ``name`` (``mock``, ``sim`` or a file name such as ``sim.yml``)."""
    return DATAFLOWS / (name if name.endswith((".yml", ".yaml")) else f"{name}.yml")
