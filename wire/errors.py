"""The structured error base every doraforge package derives its error tree from.

:class:`StructuredError` carries a stable ``code``, a human ``message``, whether a retry
can help (``retryable``) and structured ``details``, and has one wire form,
:meth:`~StructuredError.to_payload`. Each package keeps its own subclass tree
(``GatewayError``, ``PaosError``, ``RegistryError`` …) and maps it to HTTP status at its own
edge. :class:`WireError` is the transport guard's refusal, which already knows its status.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class StructuredError(Exception):
    """An error with ``code``, ``message``, ``retryable`` and ``details``.

    ``retryable_default`` lets a subclass say whether its kind is retryable when a raiser
    does not decide (``None``); ``details`` is copied so a raiser's dict can be reused.
    """

    retryable_default = False

    def __init__(
        self,
        code: str,
        message: str,
        *,
        retryable: bool | None = None,
        details: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.retryable = self.retryable_default if retryable is None else retryable
        self.details: dict[str, Any] = dict(details or {})

    def to_payload(self) -> dict[str, Any]:
        """The wire form ``{code, message, retryable, details}``."""
        return {
            "code": self.code,
            "message": self.message,
            "retryable": self.retryable,
            "details": self.details,
        }


class WireError(StructuredError):
    """A refusal at an edge; nothing behind the edge ran because of this request.

    ``status`` and ``headers`` are the HTTP answer the guard renders (``WWW-Authenticate``
    on a 401, ``Allow`` on a 405).
    """

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
        super().__init__(code, message, retryable=retryable, details=details)
        self.status = status
        self.headers: dict[str, str] = dict(headers or {})
