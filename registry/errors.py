"""The registry error tree.

``RegistryError`` is a refusal by the registry itself (bad envelope, idempotency conflict,
unknown call id, registration conflict); ``status`` is the HTTP status an edge should use.
``ToolFailure`` is raised by an adapter: the tool ran and failed, and the registry turns it
into a ``failed`` result rather than a refusal. Both carry a stable ``code``, a human
``message``, ``retryable`` and structured ``details``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class _Structured(Exception):
    """Code, message, retryable and details, and their wire form."""

    def __init__(
        self,
        code: str,
        message: str,
        *,
        retryable: bool = False,
        details: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.retryable = retryable
        self.details: dict[str, Any] = dict(details or {})

    def to_dict(self) -> dict[str, Any]:
        """The wire form ``{code, message, retryable, details}``."""
        return {
            "code": self.code,
            "message": self.message,
            "retryable": self.retryable,
            "details": self.details,
        }


class RegistryError(_Structured):
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


class ToolFailure(_Structured):
    """Raised by an adapter when the tool ran and failed; becomes a ``failed`` result."""
