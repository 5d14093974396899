"""The registry error tree.

``RegistryError`` is a refusal by the registry itself (bad envelope, idempotency conflict,
unknown call id, registration conflict); ``status`` is the HTTP status an edge should use.
``ToolFailure`` is raised by an adapter: the tool ran and failed, and the registry turns it
into a ``failed`` result rather than a refusal. Both carry a stable ``code``, a human
``message``, ``retryable`` and structured ``details``, and one wire form, ``to_payload``
(:class:`doraforge.wire.errors.StructuredError`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from doraforge.wire.errors import StructuredError


class RegistryError(StructuredError):
    """A refusal by the registry; nothing was executed because of this request."""

    def __init__(
        self,
        code: str,
        message: str,
        *,
        status: int = 400,
        retryable: bool = False,
        details: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(code, message, retryable=retryable, details=details)
        self.status = status


class ToolFailure(StructuredError):
    """Raised by an adapter when the tool ran and failed; becomes a ``failed`` result."""
