"""Which Dora generation a dataflow needs, and whether the installed ``dora`` is one.

Dora 0.x and 1.x are different generations: a 0.x CLI rejects a 1.x dataflow outright
(``unknown field 'max_restarts'``), and nodes of one generation cannot talk to the daemon
of the other (``failed to deserialize DaemonRequest``). doraforge runs on Dora 1.1
(``dora-rs-cli`` and ``dora-rs`` 1.1.x); PhyAgentOS documents Dora 0.4.1 as its baseline.

A dataflow declares its generation by what it uses: a node field that exists in one
generation only (:data:`GENERATION_FIELDS`) makes the dataflow need that generation. No
extra manifest or profile field is involved, so the same bundle still installs in
PhyAgentOS (whose manifest refuses unknown profile fields).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from doraforge.wire import strict_yaml

#: Node fields that exist in one Dora generation only: field -> major version.
GENERATION_FIELDS: Mapping[str, int] = {"max_restarts": 1, "restart_policy": 1}
#: The generation doraforge itself runs on, and how to install it.
SUPPORTED_MAJOR = 1
INSTALL_HINT = "pip install 'dora-rs-cli>=1.1,<1.2' 'dora-rs>=1.1,<1.2'"
_VERSION = re.compile(r"(\d+)\.(\d+)(?:\.(\d+))?")


def version_tuple(text: str) -> tuple[int, int, int] | None:
    """``"dora-cli 1.1.0"`` -> ``(1, 1, 0)``; ``None`` when no version is in ``text``."""
    found = _VERSION.search(text)
    if found is None:
        return None
    major, minor, patch = found.groups()
    return int(major), int(minor), int(patch or 0)


def generation(version: str) -> str:
    """The generation a version belongs to: ``"1.x"`` for 1.1.0, ``"0.x"`` for 0.4.1."""
    parsed = version_tuple(version)
    return f"{parsed[0]}.x" if parsed is not None else "unknown"


def dataflow_needs(document: Mapping[str, Any]) -> tuple[int, str] | None:
    """``(major, reason)`` when a node of ``document`` uses a generation-only field."""
    nodes = document.get("nodes")
    for node in nodes if isinstance(nodes, list) else []:
        if not isinstance(node, Mapping):
            continue
        for field, major in GENERATION_FIELDS.items():
            if field in node:
                return major, f"node {node.get('id')!r} uses {field}, a Dora {major}.x field"
    return None


def refusal(dataflow: Path, installed: str) -> str | None:
    """Why ``dataflow`` cannot run on the installed Dora ``installed``, or ``None``.

    The message names both generations and the fix. An unreadable dataflow is not refused
    here (Dora reports its own parse error).
    """
    try:
        document = strict_yaml.load(dataflow.read_text(encoding="utf-8"), aliases=True)
    except (OSError, UnicodeDecodeError, strict_yaml.YAMLRefused):
        return None
    if not isinstance(document, Mapping):
        return None
    need = dataflow_needs(document)
    parsed = version_tuple(installed)
    if need is None or parsed is None or parsed[0] == need[0]:
        return None
    major, reason = need
    fix = (
        f"install Dora {major}.x: {INSTALL_HINT}"
        if major == SUPPORTED_MAJOR
        else f"doraforge runs Dora {SUPPORTED_MAJOR}.x only; run it with a Dora {major}.x CLI"
    )
    return (
        f"{dataflow.name} needs Dora {major}.x ({reason}) but the installed dora is "
        f"{installed} (Dora {generation(installed)}); {fix}"
    )
