"""The shipped dataflows (package data): development and demo cells for ``dora run``.

Found through :mod:`importlib.resources`, so they are where the installed package is, in a
checkout and in a wheel alike. That place may be a read-only ``site-packages``: whoever runs
a shipped dataflow runs a private copy of this folder (``dora run`` writes its ``out/`` logs
next to the file).
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path, PurePath

#: The folder holding ``mock.yml``, ``sim.yml``, their Gateway configs and the overlay.
DATAFLOWS = Path(str(files(__name__)))
#: The Zenoh overlay every doraforge Dora process runs with (no silent drops under bursts).
ZENOH_OVERLAY = DATAFLOWS / "zenoh-overlay.json5"
#: The name of this folder in a checkout, as paths such as ``dataflows/sim.yml`` spell it.
FOLDER = "dataflows"


def dataflow(name: str) -> Path:
    """The shipped dataflow ``name`` (``mock``, ``sim`` or a file name such as ``sim.yml``)."""
    return DATAFLOWS / (name if name.endswith((".yml", ".yaml")) else f"{name}.yml")


def names() -> list[str]:
    """The shipped dataflows by name (``mock``, ``sim``), without their Gateway configs."""
    return sorted(
        path.stem for path in DATAFLOWS.glob("*.yml") if not path.name.endswith(".gateway.yml")
    )


def is_shipped(path: Path) -> bool:
    """Whether ``path`` is one of the shipped dataflow files (symbolic links resolved)."""
    return path.resolve().parent == DATAFLOWS.resolve()


def locate(spec: str) -> Path:
    """The dataflow file ``spec`` names.

    An existing file is that file. Otherwise ``spec`` names a shipped dataflow: ``mock``,
    ``sim.yml``, or ``dataflows/sim.yml`` — the checkout path the README uses, which so
    works from any directory once doraforge is installed.

    Raises :class:`FileNotFoundError` (naming the shipped dataflows) for anything else.
    """
    given = Path(spec)
    if given.is_file():
        return given
    pure = PurePath(spec)
    folder_ok = len(pure.parts) == 1 or (len(pure.parts) == 2 and pure.parts[0] == FOLDER)
    stem = pure.name.removesuffix(".yml").removesuffix(".yaml")
    if folder_ok and stem in names():
        return dataflow(stem)
    shipped = ", ".join(names())
    raise FileNotFoundError(f"dataflow {spec} does not exist (shipped dataflows: {shipped})")
