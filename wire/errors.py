"""The structured error base: a stable ``code``, a human ``message``, ``retryable`` and
``details``, plus the HTTP ``status`` an edge answers with."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class WireError(Exception):
    """A refusal at an edge; nothing behind the edge ran because of this request."""

    def __init__(
        self,
        code: str,
        message: str,
        *,
        status: int = 400,
        retryable: bool = False,
        details: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.status = status
        self.retryable = retryable
        self.details: dict[str, Any] = dict(details or {})
        self.headers: dict[str, str] = dict(headers or {})

    def to_payload(self) -> dict[str, Any]:
        """The wire form ``{code, message, retryable, details}``."""
        return {
            "code": self.code,
            "message": self.message,
            "retryable": self.retryable,
            "details": self.details,
        }
