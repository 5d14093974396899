"""Inventory documents of the running registry app (skeleton: implemented by the inventory
work): ``ROUTES`` serves them under ``/api/api-docs``."""

from __future__ import annotations

from starlette.routing import BaseRoute

ROUTES: list[BaseRoute] = []
