"""Canonical JSON: one byte form per value, so its SHA-256 is a stable identity.

The form is sorted keys, compact separators (``,`` and ``:``), UTF-8 without ASCII
escaping, and no ``NaN``/``Infinity``. It is a contract, not a style: the Gateway
publishes a ToolSpec's bytes and their SHA-256 (``spec_sha256``), PAOS freezes that digest
in a binding and compares it on every call, and the registry's ETags and idempotency
fingerprints are taken over the same form. Changing any byte here changes every identity.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

# One shared encoder: json.dumps with keyword arguments builds a new encoder per call, and
# these run on every call and every catalog read. encode() keeps no state between calls.
_ENCODER = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
)


def canonical_json(value: Any) -> str:
    """The canonical text of ``value``.

    Raises ``ValueError`` for ``NaN``/``Infinity`` (and circular values) and ``TypeError``
    for anything that is not JSON data.
    """
    return _ENCODER.encode(value)


def canonical_bytes(value: Any) -> bytes:
    """The canonical text of ``value`` as UTF-8.

    Raises as :func:`canonical_json`, and ``UnicodeEncodeError`` (a ``ValueError``) for a
    string holding a lone surrogate.
    """
    return canonical_json(value).encode("utf-8")


def sha256_hex(value: Any) -> str:
    """The hex SHA-256 of the canonical bytes of ``value``; raises as :func:`canonical_bytes`."""
    return hashlib.sha256(canonical_bytes(value)).hexdigest()
