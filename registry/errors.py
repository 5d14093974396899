"""The registry error tree.

``RegistryError`` is a refusal by the registry itself, always raised as the subclass that
says what went wrong: :class:`InvalidRequest`, :class:`Forbidden`, :class:`NotFound`,
:class:`Conflict` (and :class:`Expired`), :class:`Unprocessable`. The domain never picks an
HTTP status: each edge maps these classes in one table (``registry.http.STATUS_FOR_ERROR``,
``registry.mcp.MCP_FAULT_FOR_ERROR``).
``ToolFailure`` is raised by an adapter: the tool ran and failed, and the registry turns it
into a ``failed`` result rather than a refusal. Both carry a stable ``code``, a human
``message``, ``retryable`` and structured ``details``, and one wire form, ``to_payload``
(:class:`doraforge.wire.errors.StructuredError`).
"""

from __future__ import annotations

from typing import Any, Self

from doraforge.wire.errors import StructuredError


class RegistryError(StructuredError):
    """A refusal by the registry; nothing was executed because of this request.

    Abstract: only its subclasses are raised, so every refusal has a meaning an edge can
    map (``TypeError`` when the base itself is instantiated)."""

    def __new__(cls, *args: Any, **kwargs: Any) -> Self:
        if cls is RegistryError:
            raise TypeError("raise the RegistryError subclass that says what went wrong")
        return super().__new__(cls, *args, **kwargs)


class InvalidRequest(RegistryError):
    """The call, query, body or tool entry is malformed; fix the request and resend."""


class Forbidden(RegistryError):
    """The caller may not do this (a gate's denial: approval, grants, permissions, egress)."""


class NotFound(RegistryError):
    """No such tool, retained call, API service or API tool."""


class Conflict(RegistryError):
    """The request conflicts with state the registry holds (a name taken, a requestId used
    for another call, a host the outbound policy will never dial)."""


class Expired(Conflict):
    """The requestId's result has left retention; the id stays spent and is not run again."""


class Unprocessable(RegistryError):
    """Well-formed but unacceptable content (an API bundle that fails validation)."""


class ToolFailure(StructuredError):
    """Raised by an adapter when the tool ran and failed; becomes a ``failed`` result."""
