"""Bundle persistence: one JSON file per service, written atomically."""

from __future__ import annotations

import json
import logging
import os
import tempfile
from pathlib import Path

from doraforge.registry.api_tools.bundle import Bundle, parse_bundle
from doraforge.registry.api_tools.errors import RegistryError

logger = logging.getLogger(__name__)


class BundleStore:
    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def _path(self, name: str) -> Path:
        return self.directory / f"{name}.json"

    def save(self, bundle: Bundle) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        text = json.dumps(bundle.model_dump(by_alias=True, exclude_none=True), indent=2)
        fd, tmp = tempfile.mkstemp(dir=self.directory, prefix=".bundle-", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, self._path(bundle.name))
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

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
