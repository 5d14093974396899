"""The Gateway's error tree.

Every error a caller can see carries a stable ``code``, a human ``message``, whether a
retry can help (``retryable``) and structured ``details``. The HTTP status for each class
is chosen in exactly one place, :mod:`gateway.http`.
"""

from __future__ import annotations

from doraforge.wire.errors import StructuredError


class GatewayError(StructuredError):
    """Base of every error the Gateway reports to a caller (wire form: ``to_payload``)."""


class InvalidRequest(GatewayError, ValueError):
    """The request body, path or arguments are malformed; nothing was admitted."""


class NotFound(GatewayError, LookupError):
    """Unknown tool, endpoint, operation or invocation."""


class Gone(GatewayError, LookupError):
    """The resource existed but has been evicted from bounded retention."""


class Conflict(GatewayError):
    """The request conflicts with existing state (caller_id reuse, wrong semantics)."""


class Unprocessable(GatewayError):
    """The provider declined the request before any side effect."""


class ProviderProtocolError(GatewayError):
    """The provider answered in a way the contract forbids (e.g. a non-terminal Query)."""


class Unavailable(GatewayError):
    """The endpoint is absent, unbound or at its concurrency limit."""

    retryable_default = True


class JournalUnavailable(Unavailable):
    """The journal could not record an admission, so nothing was dispatched; retry later."""


class QueryTimeout(GatewayError, TimeoutError):
    """A Query did not answer before its deadline; its outcome is unknown."""


class ConfigError(ValueError):
    """The Gateway configuration is invalid; the message names the field and file."""
