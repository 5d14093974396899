"""Bundle persistence: one JSON file per live service, written atomically; deleted ones kept.

A delete moves ``<name>.json`` to ``deleted/<name>.<stamp>.json`` (a tombstone, never
listed or registered): every deleted version stays readable as the service's history, and
saving the service again restores it as a new live file.
"""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path

from doraforge.registry.api_tools.bundle import Bundle, parse_bundle
from doraforge.registry.api_tools.errors import RegistryError
from doraforge.wire.files import atomic_write_text

logger = logging.getLogger(__name__)


class BundleStore:
    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def _path(self, name: str) -> Path:
        return self.directory / f"{name}.json"

    @property
    def tombstones(self) -> Path:
        return self.directory / "deleted"

    def save(self, bundle: Bundle) -> None:
        text = json.dumps(bundle.model_dump(by_alias=True, exclude_none=True), indent=2)
        atomic_write_text(self._path(bundle.name), text)

    def delete(self, name: str) -> Path:
        """Tombstone ``name``'s live file; the path it now has under ``deleted/``."""
        self.tombstones.mkdir(parents=True, exist_ok=True)
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime()) + f"-{time.time_ns() % 10**9:09d}"
        target = self.tombstones / f"{name}.{stamp}.json"
        os.replace(self._path(name), target)
        return target

    def history(self, name: str) -> list[Path]:
        """The tombstoned versions of ``name``, oldest first."""
        if not self.tombstones.is_dir():
            return []
        return sorted(self.tombstones.glob(f"{name}.*.json"))

    def load_all(self) -> list[Bundle]:
        """Every stored bundle that is valid today. A file that no longer passes validation
        (e.g. saved before a rule was tightened) is skipped with a warning: its tools stay
        unregistered rather than keeping the server from starting."""
        if not self.directory.is_dir():
            return []
        bundles = []
        for path in sorted(self.directory.glob("*.json")):
            try:
                bundles.append(parse_bundle(json.loads(path.read_text(encoding="utf-8"))))
            except (OSError, ValueError, RegistryError) as exc:
                logger.warning("API bundle %s skipped: %s", path.name, exc)
        return bundles
