"""Verifiers registered by criterion kind, and the loop that runs a contract's criteria."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence

import httpx

from doraforge.paos.verify.contract import Criterion
from doraforge.paos.verify.errors import DuplicateVerifier
from doraforge.paos.verify.external import ExternalVerifier
from doraforge.paos.verify.protocol import CriterionResult, VerificationContext, Verifier
from doraforge.paos.verify.state import StateVerifier
from doraforge.paos.verify.vision import VisionConfig, VisionVerifier

log = logging.getLogger(__name__)


class VerifierRegistry:
    """Criterion kind -> verifier; registering a kind twice raises :class:`DuplicateVerifier`."""

    def __init__(self, verifiers: Iterable[Verifier] = ()) -> None:
        self._verifiers: dict[str, Verifier] = {}
        for verifier in verifiers:
            self.register(verifier)

    def register(self, verifier: Verifier) -> None:
        """Add ``verifier`` under its ``kind``."""
        if verifier.kind in self._verifiers:
            raise DuplicateVerifier(f"a verifier for kind {verifier.kind!r} is already registered")
        self._verifiers[verifier.kind] = verifier

    def get(self, kind: str) -> Verifier | None:
        """The verifier for ``kind``, if any."""
        return self._verifiers.get(kind)

    @property
    def kinds(self) -> tuple[str, ...]:
        """The registered kinds."""
        return tuple(self._verifiers)


def default_registry(
    http_client: httpx.AsyncClient | None = None, vision: VisionConfig | None = None
) -> VerifierRegistry:
    """The built-in verifiers: ``state``, ``vision`` and ``external``."""
    return VerifierRegistry(
        [StateVerifier(), VisionVerifier(vision), ExternalVerifier(http_client)]
    )


async def run_criteria(
    criteria: Sequence[Criterion], context: VerificationContext, registry: VerifierRegistry
) -> list[CriterionResult]:
    """Evaluate every criterion in order; never raises.

    A kind without a verifier, or a verifier that raises despite its contract, yields an
    ``inconclusive`` result, which ``enforce`` treats as failure.
    """
    return [await _run_one(criterion, context, registry) for criterion in criteria]


async def _run_one(
    criterion: Criterion, context: VerificationContext, registry: VerifierRegistry
) -> CriterionResult:
    verifier = registry.get(criterion.kind)
    if verifier is None:
        return CriterionResult(criterion.id, "inconclusive", f"no verifier for {criterion.kind}")
    try:
        return await verifier.verify(criterion, context)
    except Exception as exc:  # a verifier bug must not crash finalize; it fails closed instead
        log.exception("verifier %s raised on criterion %s", criterion.kind, criterion.id)
        return CriterionResult(criterion.id, "inconclusive", f"verifier error: {exc!r}")
