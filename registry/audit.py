"""The audit trail: one redacted record per call outcome.

A record names the request, tool, principal, scope, state, error code, duration and the
argument *keys* — never argument values, results or error details, which may carry personal
data. Keys that look like credentials (token, secret, password, authorization, api key,
cookie) are masked too, since even a key name can reveal which credential was sent.
Approval events (requested, approved, denied, expired, withdrawn) are records of their own
(``kind: "approval"``): the approval id, request, tool, caller, the call's fingerprint and
the operator's reason, never the arguments. Records live in a bounded in-memory deque and,
optionally, are appended to a JSONL file.

A call that concerns one cell of a fleet (a skill's runtime and the robot of its tool,
:mod:`registry.cells`) is named in its records as ``cell``: the robot tools note the cell
of each requestId before they run (:meth:`AuditLog.note_cell`), and approvals ask
:meth:`AuditLog.cell_of`, so one registry over several cells never audits an ambiguous
"arm.move_to_pose approved".
"""

from __future__ import annotations

import functools
import json
import re
import time
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from doraforge.wire.files import private_file

REDACTED = "[REDACTED]"
SENSITIVE_KEY = re.compile(
    r"token|secret|passw|authori[sz]ation|api[-_]?key|cookie|credential|bearer", re.IGNORECASE
)

type AuditRecord = dict[str, Any]
#: A cell as records carry it (``registry.cells.Cell.public``).
type CellName = Mapping[str, str | None]
#: Names the cell of a call from its tool name and arguments, or ``None``.
type CellNamer = Callable[[str, Mapping[str, Any]], Awaitable[CellName | None]]

#: How many requestIds' cells are remembered until their outcome is recorded.
MAX_NOTED_CELLS = 4096


def redact_keys(keys: Iterable[str]) -> list[str]:
    """Argument keys in sorted order, credential-looking ones masked."""
    return list(_redacted(tuple(keys)))


def redact_arguments(value: Any) -> Any:
    """``value`` with the value under every credential-looking key masked, at any depth.

    For an operator who must see what a call will do (an approval), not for the audit
    trail, which keeps argument keys only."""
    if isinstance(value, Mapping):
        return {
            key: REDACTED if SENSITIVE_KEY.search(str(key)) else redact_arguments(item)
            for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        return [redact_arguments(item) for item in value]
    return value


@functools.lru_cache(maxsize=1024)
def _redacted(keys: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(sorted(REDACTED if SENSITIVE_KEY.search(key) else key for key in keys))


class AuditLog:
    """Bounded in-memory audit records (``max_records``, oldest dropped first), optionally
    mirrored to a JSONL file at ``path``."""

    def __init__(self, *, max_records: int = 10_000, path: Path | str | None = None) -> None:
        self._records: deque[AuditRecord] = deque(maxlen=max_records)
        self._path = Path(path) if path is not None else None
        self._cells: OrderedDict[str, CellName] = OrderedDict()
        self._namer: CellNamer | None = None

    def name_cells(self, namer: CellNamer) -> None:
        """Let approvals name the cell of the call they hold (see :meth:`cell_of`)."""
        self._namer = namer

    async def cell_of(self, tool: str, arguments: Mapping[str, Any]) -> CellName | None:
        """The cell a call concerns, when a namer is set and can tell; else ``None``."""
        return None if self._namer is None else await self._namer(tool, arguments)

    def note_cell(self, request_id: str, cell: CellName | None) -> None:
        """Remember the cell of ``request_id``: its records (outcome, duplicates) carry it."""
        if cell is None:
            return
        self._cells[request_id] = dict(cell)
        self._cells.move_to_end(request_id)
        while len(self._cells) > MAX_NOTED_CELLS:
            self._cells.popitem(last=False)

    def record(
        self,
        *,
        request_id: str | None,
        name: str | None,
        principal_id: str,
        scope: str,
        state: str,
        error_code: str | None,
        duration_s: float,
        argument_keys: Iterable[str] = (),
        duplicate: bool = False,
    ) -> AuditRecord:
        """Append one redacted record and return it."""
        # Fixed fields only: argument values, results and error details never enter.
        entry: AuditRecord = {
            "at": time.time(),
            "requestId": request_id,
            "name": name,
            "principal": principal_id,
            "scope": scope,
            "state": state,
            "errorCode": error_code,
            "durationMs": round(duration_s * 1000, 3),
            "argumentKeys": redact_keys(argument_keys),
            "duplicate": duplicate,
        }
        cell = self._cells.get(request_id) if request_id is not None else None
        if cell is not None:
            entry["cell"] = dict(cell)
        return self._append(entry)

    def record_approval(
        self,
        *,
        event: str,
        approval_id: str,
        request_id: str,
        name: str,
        principal_id: str,
        fingerprint: str,
        reason: str | None = None,
        by: str | None = None,
        cell: CellName | None = None,
    ) -> AuditRecord:
        """Append one approval event (``requested``, ``approved``, ``denied``, ``expired``,
        ``withdrawn``) and return it; ``by`` names the operator principal of a decision,
        ``cell`` the cell the call concerns (when it concerns one)."""
        entry = {
            "at": time.time(),
            "kind": "approval",
            "event": event,
            "approvalId": approval_id,
            "requestId": request_id,
            "name": name,
            "principal": principal_id,
            "fingerprint": fingerprint,
            "reason": reason,
            "by": by,
        }
        if cell is not None:
            entry["cell"] = dict(cell)
        return self._append(entry)

    def record_task_ended(self, notice: Mapping[str, Any]) -> AuditRecord:
        """Append that an agent task was ended for its owner (``owner_stopped``,
        ``idle_timeout``: :mod:`paos.owners`) and return it."""
        entry = {
            "at": time.time(),
            "kind": "task",
            "event": "ended",
            "taskId": notice["task_id"],
            "reason": notice["reason"],
            "owner": notice["owner_id"],
            "state": notice["state"],
            "idleS": notice["idle_s"],
        }
        return self._append(entry)

    def _append(self, entry: AuditRecord) -> AuditRecord:
        self._records.append(entry)
        if self._path is not None:
            with private_file(self._path).open("a", encoding="utf-8") as handle:
                handle.write(json.dumps(entry, ensure_ascii=False) + "\n")
        return entry

    def records(self) -> list[AuditRecord]:
        """The retained records, oldest first."""
        return list(self._records)
