"""The operator's recipe routes under ``/api/recipes`` (skeleton: implemented by the
recipes work). ``attach`` opens the library in ``store_dir`` and registers its tools."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from starlette.routing import BaseRoute

if TYPE_CHECKING:
    from fastapi import FastAPI

    from doraforge.registry.service import RegistryService

ROUTES: list[BaseRoute] = []


def attach(app: FastAPI, service: RegistryService, store_dir: Path) -> None:
    """Open the recipe library in ``store_dir`` and register its active recipes."""
