"""Canonical JSON: one byte form per value, so its SHA-256 is a stable identity."""

from __future__ import annotations

import hashlib
import json
from typing import Any


def canonical_bytes(value: Any) -> bytes:
    """Serialise with sorted keys, no whitespace, UTF-8 and no NaN/Infinity."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")


def sha256_hex(value: Any) -> str:
    """Return the hex SHA-256 of the canonical form of ``value``."""
    return hashlib.sha256(canonical_bytes(value)).hexdigest()
