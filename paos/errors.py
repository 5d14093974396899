"""The PAOS error tree.

Every error carries a stable ``code``, a human ``message``, whether retrying the same
request can help (``retryable``) and structured ``details``. Errors that leave the remote
state of a request unknown say so with ``remote_state = "unknown"``: a caller must reconcile
by reading (status, result, caller_id lookup), never by sending the request again.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from doraforge.wire.errors import StructuredError

type RemoteState = Literal["unknown"]


class PaosError(StructuredError):
    """Base of every error PAOS raises to its callers (wire form: ``to_payload``)."""


class ForgeHttpError(PaosError):
    """The Gateway answered with its error envelope (``{"ok": false, "error": {...}}``).

    ``code``, ``retryable`` and ``details`` are the Gateway's; ``payload`` is the whole
    envelope. The Gateway decided, so the remote state is known: nothing was done for a
    4xx, and a 503 means the request was not admitted.
    """

    def __init__(
        self,
        code: str,
        message: str,
        *,
        status_code: int,
        payload: Mapping[str, Any] | None,
        retryable: bool = False,
        details: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(code, message, retryable=retryable, details=details)
        self.status_code = status_code
        self.payload = dict(payload) if payload is not None else None


class ForgeTimeout(PaosError, TimeoutError):
    """No answer within the client timeout: the remote state is unknown.

    The request may or may not have been admitted or executed. Reconcile by reading;
    never re-send it and never infer that it failed.
    """

    remote_state: RemoteState = "unknown"


class ForgeTransportError(PaosError, ConnectionError):
    """The connection failed or broke mid-exchange: the remote state is unknown."""

    remote_state: RemoteState = "unknown"


class ForgeProtocolError(PaosError):
    """The Gateway's answer breaks the envelope contract (not JSON, wrong status, bad data).

    Something answered, but not as the contract says, so for a POST the remote state is
    unknown. ``status_code`` is the HTTP status seen, ``payload`` the parsed body if any.
    """

    remote_state: RemoteState = "unknown"

    def __init__(
        self,
        code: str,
        message: str,
        *,
        status_code: int | None = None,
        payload: Any = None,
        details: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(code, message, retryable=False, details=details)
        self.status_code = status_code
        self.payload = payload


class RecordIndeterminate(PaosError):
    """A request was sent but PAOS could not record what came of it: remote state unknown.

    Raised when the AgentTask store fails after an intent was committed (disk full, lock,
    I/O error): the robot may have moved. Never re-send the request; once the store is
    readable again, ``TaskService.reconcile`` finds the invocation by the record's
    ``caller_id``. ``details`` holds ``record_id``, ``caller_id``, ``tool_id``, the
    ``invocation_id`` when the Gateway's answer arrived, and the ``store_error``.
    """

    remote_state: RemoteState = "unknown"
