"""The seam between the task coordinator and the verifiers.

A verifier is transport-free: everything it may read arrives in a
:class:`VerificationContext` built by the coordinator, and live state is read only through
the ``query`` callable the coordinator supplies. A verifier answers with a
:class:`CriterionResult` and never raises for a bad frame, a missing path or an unreachable
service; those are ``inconclusive``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from doraforge.paos.verify.contract import Criterion

CriterionStatus = Literal["pass", "fail", "inconclusive"]
CRITERION_STATUSES: tuple[CriterionStatus, ...] = ("pass", "fail", "inconclusive")

QueryFn = Callable[[str, Mapping[str, Any]], Awaitable[Mapping[str, Any]]]
"""``await query(tool_id, arguments)`` returns the outputs of a Query tool (the ``data``'s
outputs, not the envelope); it raises on any failure."""


@dataclass(frozen=True)
class VerificationContext:
    """What a verifier may see of one task revision.

    ``evidence`` holds artifact dicts as recorded by evidence capture (``artifact_id``,
    ``source``, ``phase`` before|after, ``seq``, ``sha256``, workspace-relative ``path`` ...)
    plus an absolute ``file`` path the caller resolved and re-hashed. ``lessons`` are
    advisory only and never change a verdict.
    """

    task_id: str
    revision_id: str
    binding: Mapping[str, Any] = field(default_factory=dict)
    records: Sequence[Mapping[str, Any]] = ()
    evidence: Sequence[Mapping[str, Any]] = ()
    query: QueryFn | None = None
    lessons: Sequence[Mapping[str, Any]] = ()


@dataclass(frozen=True)
class CriterionResult:
    """The outcome of one criterion; ``evidence_refs`` are the artifact ids it looked at."""

    criterion_id: str
    status: CriterionStatus
    detail: str = ""
    evidence_refs: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form for the task store."""
        return {
            "criterion_id": self.criterion_id,
            "status": self.status,
            "detail": self.detail,
            "evidence_refs": list(self.evidence_refs),
        }


class Verifier(Protocol):
    """Decides one criterion of one kind (``state``, ``vision``, ``external`` ...)."""

    kind: str

    async def verify(self, criterion: Criterion, context: VerificationContext) -> CriterionResult:
        """Evaluate ``criterion``; return ``inconclusive`` rather than raise on bad input."""
        ...


def artifact_ref(artifact: Mapping[str, Any]) -> str:
    """The id by which a verdict cites an artifact (its id, else its content hash)."""
    for key in ("artifact_id", "id", "sha256"):
        value = artifact.get(key)
        if isinstance(value, str) and value:
            return value
    return ""
