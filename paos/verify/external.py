"""The external verifier: POST the verification context to an HTTP service.

The service answers ``{"status": "pass" | "fail" | "inconclusive", "detail"?: str,
"evidence_refs"?: [str]}``. One POST per criterion, a timeout, no retries and no redirects:
any transport error, non-2xx status or malformed answer is ``inconclusive``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

import httpx

from doraforge.paos.verify.contract import Criterion, ExternalCriterion
from doraforge.paos.verify.protocol import (
    CRITERION_STATUSES,
    CriterionResult,
    VerificationContext,
    artifact_ref,
)
from doraforge.wire import strict_json

log = logging.getLogger(__name__)

MAX_RESPONSE_BYTES = 64 * 1024
MAX_DETAIL_CHARS = 1000
# Evidence fields a remote verifier may see; the absolute ``file`` path stays local.
_EVIDENCE_FIELDS = (
    "artifact_id",
    "source",
    "phase",
    "seq",
    "captured_at_ms",
    "received_at_ms",
    "media_type",
    "width",
    "height",
    "size",
    "sha256",
    "path",
)


def context_payload(criterion: ExternalCriterion, context: VerificationContext) -> dict[str, Any]:
    """The JSON body sent to the external verifier."""
    return {
        "criterion": criterion.model_dump(mode="json"),
        "task_id": context.task_id,
        "revision_id": context.revision_id,
        "binding": dict(context.binding),
        "records": [dict(record) for record in context.records],
        "evidence": [
            {key: artifact[key] for key in _EVIDENCE_FIELDS if key in artifact}
            for artifact in context.evidence
        ],
        "lessons": [dict(lesson) for lesson in context.lessons],
    }


class ExternalVerifier:
    """Verifier for ``kind: external`` criteria.

    ``client`` is an ``httpx.AsyncClient`` owned by the caller (tests pass one with a
    ``MockTransport``); without one, a short-lived client is made per call.
    """

    kind = "external"

    def __init__(self, client: httpx.AsyncClient | None = None) -> None:
        self._client = client

    async def verify(self, criterion: Criterion, context: VerificationContext) -> CriterionResult:
        """POST the context to ``criterion.url`` and map the answer."""
        if not isinstance(criterion, ExternalCriterion):
            return CriterionResult(criterion.id, "inconclusive", "not an external criterion")
        try:
            body = json.dumps(context_payload(criterion, context), default=str).encode()
            status_code, content = await self._post(criterion, body)
        except (httpx.HTTPError, TypeError, ValueError) as exc:
            log.info("external criterion %s: %r", criterion.id, exc)
            return _inconclusive(criterion, f"external verifier failed: {type(exc).__name__}")
        if not 200 <= status_code < 300:
            return _inconclusive(criterion, f"external verifier answered HTTP {status_code}")
        return _map_answer(criterion, content, context)

    async def _post(self, criterion: ExternalCriterion, body: bytes) -> tuple[int, bytes]:
        if self._client is not None:
            return await _exchange(self._client, criterion, body)
        async with httpx.AsyncClient(follow_redirects=False) as client:
            return await _exchange(client, criterion, body)


async def _exchange(
    client: httpx.AsyncClient, criterion: ExternalCriterion, body: bytes
) -> tuple[int, bytes]:
    """One POST; the answer is read in chunks and refused past ``MAX_RESPONSE_BYTES``."""
    headers = {"content-type": "application/json", "accept": "application/json"}
    timeout = httpx.Timeout(criterion.timeout_s)
    request = client.stream("POST", criterion.url, content=body, headers=headers, timeout=timeout)
    async with request as response:
        content = bytearray()
        async for chunk in response.aiter_bytes():
            content += chunk
            if len(content) > MAX_RESPONSE_BYTES:
                raise ValueError("external verifier answer too large")
        return response.status_code, bytes(content)


def _map_answer(
    criterion: ExternalCriterion, content: bytes, context: VerificationContext
) -> CriterionResult:
    try:
        answer = strict_json.loads(content)
    except strict_json.JSONRefused:
        return _inconclusive(criterion, "external verifier answer is not JSON")
    status = answer.get("status") if isinstance(answer, Mapping) else None
    if status not in CRITERION_STATUSES:
        return _inconclusive(criterion, f"external verifier status {status!r} is not recognised")
    detail = answer.get("detail")
    detail = detail[:MAX_DETAIL_CHARS] if isinstance(detail, str) else ""
    return CriterionResult(criterion.id, status, detail, _known_refs(answer, context))


def _known_refs(answer: Mapping[str, Any], context: VerificationContext) -> tuple[str, ...]:
    # Only artifacts that exist in this context may be cited by the verdict.
    known = {artifact_ref(artifact) for artifact in context.evidence}
    refs = answer.get("evidence_refs")
    if not isinstance(refs, list):
        return ()
    return tuple(ref for ref in refs if isinstance(ref, str) and ref in known)


def _inconclusive(criterion: ExternalCriterion, detail: str) -> CriterionResult:
    return CriterionResult(criterion.id, "inconclusive", detail)
