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


def _payload(code: str, message: str, retryable: bool, details: dict[str, Any]) -> dict[str, Any]:
    return {"code": code, "message": message, "retryable": retryable, "details": details}


class RegistryError(Exception):
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
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.status = status
        self.retryable = retryable
        self.details: dict[str, Any] = dict(details or {})

    def to_dict(self) -> dict[str, Any]:
        """The wire form ``{code, message, retryable, details}``."""
        return _payload(self.code, self.message, self.retryable, self.details)


class ToolFailure(Exception):
    """Raised by an adapter when the tool ran and failed; becomes a ``failed`` result."""

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
        return _payload(self.code, self.message, self.retryable, self.details)
