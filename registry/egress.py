"""The egress policy: which network hosts a tool may declare, per principal, changed live.

A host a tool declares (``policy.egressHosts``, or a host a built-in tool is about to dial)
is reachable for a caller when either

- the tool's own **source** declared it (:meth:`EgressPolicy.declare`): adding the source
  was the operator's vetting (saving an API bundle passes the outbound policy; an MCP
  server's hosts are in the operator's ``serve`` config), and removing or replacing the
  source takes its hosts away again. A declaration serves that source's tools only: never
  another source's, never a built-in that dials what its caller names (``http_fetch``); an
  API bundle declares its origin, scheme and port included (``http://127.0.0.1:20900``),
  so its host's other ports stay closed; or
- the **operator's policy** allows it for the caller's principal: egress is off by
  default; enabled, only the allowlist passes (an enabled, empty allowlist denies every
  host) unless ``allow_any`` opens every host. A per-principal overlay (keyed by the
  principal's scope, which follows the credential presented: ``agent`` for the agent
  token, ``ui`` for the operator's) can switch egress on or off for that principal and
  adds its own hosts to the base list.

Hosts are bare lower-case names or IP literals, optionally with a port (``api.example.com``,
``127.0.0.1:8080``, ``[::1]:9000``), read with the API tools' host rules
(``registry.api_tools.addresses``): numeric IPv4 spellings fold to dotted quads, IPv4
hidden in IPv6 is unwrapped. An operator entry without a port covers every port of its
host; one with a port covers only that port. Schemes, paths, wildcards and ranges are
refused in operator entries.

The operator part changes live through ``registry.egress_routes`` (each change audited and,
given a path, written whole to ``<home>/egress.json``, which replaces the config's part at
the next start). Reads take one immutable snapshot, so a check never sees half a change.
"""

from __future__ import annotations

import ipaddress
import json
import logging
import re
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from doraforge.registry.api_tools.addresses import parse_host, split_port
from doraforge.registry.api_tools.errors import OutboundDenied
from doraforge.registry.api_tools.outbound import DEFAULT_PORTS
from doraforge.registry.audit import AuditLog
from doraforge.registry.errors import InvalidRequest, ToolFailure, Unprocessable
from doraforge.registry.model import Principal
from doraforge.wire.files import atomic_write_text

logger = logging.getLogger(__name__)

#: The principals an overlay can name: the scopes ``registry.http.caller_principal`` gives.
type PrincipalKey = Literal["agent", "mind", "ui", "voice"]
PRINCIPAL_KEYS: tuple[PrincipalKey, ...] = ("agent", "mind", "ui", "voice")
#: The operator route a denial points at ("allow this host from now on").
ALLOW_ROUTE = "/api/egress/allow"
MAX_HOSTS = 1000
_SOURCE_ID = r"^[A-Za-z0-9][A-Za-z0-9._:@/-]{0,199}$"


def egress_host(text: str) -> str:
    """The canonical spelling of an egress host entry; ``ValueError`` saying what to write.

    Lower case, dotted-quad IPv4, IPv6 in brackets, an optional ``:port``; a bare IPv6
    address (``::1``, as an API bundle declares it) is read as that address, no port."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError("a host must be a non-empty string such as api.example.com")
    written = text.strip().lower()
    if "://" in written or "/" in written or "*" in written or "?" in written:
        raise ValueError(
            f"{text[:80]!r} is not a bare host; write only the hostname (e.g. api.example.com), "
            "no scheme, path, wildcard or range"
        )
    try:
        target, port = split_port(written)
        parsed = parse_host(target)
    except (ValueError, OutboundDenied) as exc:
        why = exc.message if isinstance(exc, OutboundDenied) else str(exc)
        raise ValueError(f"{text[:80]!r} is not a host: {why}") from None
    name = f"[{parsed}]" if isinstance(parsed, ipaddress.IPv6Address) else str(parsed)
    return name if port is None else f"{name}:{port}"


def source_host(text: str) -> str:
    """The canonical spelling of a host a source declares: an origin
    (``scheme://host:port``, the port always written) or an operator-style host entry
    (:func:`egress_host`); ``ValueError`` saying what to write."""
    if not isinstance(text, str) or "://" not in text:
        return egress_host(text)
    scheme, _, rest = text.strip().partition("://")
    scheme = scheme.lower()
    if scheme not in DEFAULT_PORTS:
        raise ValueError(f"{text[:80]!r}: a declared origin is http:// or https://")
    host = egress_host(rest)
    if split_port(host)[1] is None:
        host = f"{host}:{DEFAULT_PORTS[scheme]}"
    return f"{scheme}://{host}"


def _covers(entry: str, host: str) -> bool:
    """Whether ``entry`` (an allowlist host or a declared origin) speaks for ``host`` (both
    canonical): the same host, and the entry names no port or the host's port. An origin
    always names its port."""
    entry_host, entry_port = split_port(entry.partition("://")[2] or entry)
    host_host, host_port = split_port(host)
    return entry_host == host_host and (entry_port is None or entry_port == host_port)


def _hosts(values: Iterable[str], spell: Any = egress_host) -> tuple[str, ...]:
    """Canonical (by ``spell``), de-duplicated, in first-seen order; bounded."""
    seen: dict[str, None] = {}
    for value in values:
        seen[spell(value)] = None
    if len(seen) > MAX_HOSTS:
        raise ValueError(f"at most {MAX_HOSTS} hosts")
    return tuple(seen)


class PrincipalEgress(BaseModel):
    """One principal's overlay: ``enabled`` (``None`` inherits the base switch) and hosts
    allowed for it on top of the base list."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    enabled: bool | None = None
    hosts: tuple[str, ...] = ()

    @field_validator("hosts", mode="before")
    @classmethod
    def _canonical(cls, hosts: Any) -> Any:
        return _hosts(hosts) if isinstance(hosts, list | tuple) else hosts


class EgressSettings(BaseModel):
    """The operator's part of the policy, as the config file's ``egress`` section and the
    ``PUT /api/egress`` body spell it (strict: unknown keys and coerced values refused)."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    enabled: bool = False
    allow_any: bool = False
    hosts: tuple[str, ...] = ()
    principals: dict[PrincipalKey, PrincipalEgress] = Field(default_factory=dict)

    @field_validator("hosts", mode="before")
    @classmethod
    def _canonical(cls, hosts: Any) -> Any:
        return _hosts(hosts) if isinstance(hosts, list | tuple) else hosts

    def document(self) -> dict[str, Any]:
        """The JSON form (what ``egress.json`` holds and ``GET /api/egress`` shows)."""
        return self.model_dump(mode="json")


def parse_egress(data: Any, *, where: str = "egress") -> EgressSettings:
    """``data`` as :class:`EgressSettings`; :class:`InvalidRequest` ``EGRESS_INVALID`` whose
    one-line message names the first failing field (``egress.hosts.0: …``)."""
    try:
        return EgressSettings.model_validate(data)
    except ValidationError as exc:
        error = exc.errors()[0]
        path = ".".join(str(part) for part in (where, *error["loc"]) if part != "[key]")
        message = str(error["msg"]).removeprefix("Value error, ")
        raise InvalidRequest(
            "EGRESS_INVALID", f"{path}: {message}", details={"field": path}
        ) from None


def principal_key(principal: Principal | str | None) -> str | None:
    """The overlay key of ``principal``: its scope; a string is taken as the key; ``None``
    (no caller, say a sandbox deciding its network) reads the base policy alone."""
    if isinstance(principal, Principal):
        return principal.scope
    return principal


@dataclass(frozen=True)
class _State:
    """One immutable view: the operator part and the sources' declarations."""

    operator: EgressSettings = field(default_factory=EgressSettings)
    declared: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    origin: Literal["default", "settings", "file", "route"] = "default"


class EgressPolicy:
    """Live egress policy of one registry (``RegistryService.egress``).

    Thread- and task-safe: changes swap one immutable snapshot under a lock (and write the
    file and the audit record in the same critical section, so they follow change order);
    :meth:`allows` reads the current snapshot without locking. Every change is audited in
    ``audit`` when one is given.
    """

    def __init__(
        self,
        settings: EgressSettings | None = None,
        *,
        audit: AuditLog | None = None,
        path: Path | None = None,
    ) -> None:
        self._lock = threading.Lock()
        self._audit = audit
        self._path: Path | None = None
        self._state = _State()
        if settings is not None or path is not None:
            self.configure(settings or EgressSettings(), path=path)

    # -- reading -------------------------------------------------------------------------

    @property
    def enabled(self) -> bool:
        """The base switch (overlays may differ; see :meth:`effective`)."""
        return self._state.operator.enabled

    @property
    def allow_any(self) -> bool:
        """Whether every host passes for each principal whose egress is enabled."""
        return self._state.operator.allow_any

    @property
    def operator(self) -> EgressSettings:
        """The operator's part as it stands."""
        return self._state.operator

    @property
    def path(self) -> Path | None:
        """Where operator changes are persisted (``None``: in memory only)."""
        return self._path

    def declared(self) -> dict[str, list[str]]:
        """Which source declared which hosts: ``{source_id: [host, …]}``."""
        return {source: list(hosts) for source, hosts in sorted(self._state.declared.items())}

    def declared_by(self, host: str) -> list[str]:
        """The sources whose declarations cover ``host`` (canonical or not); ``host``
        without a port names its host on any port (``127.0.0.1`` finds a bundle declaring
        ``http://127.0.0.1:20900``)."""
        try:
            wanted = egress_host(host)
        except ValueError:
            return []
        name, port = split_port(wanted)

        def names(entry: str) -> bool:
            entry_name = split_port(entry.partition("://")[2] or entry)[0]
            return _covers(entry, wanted) or (port is None and entry_name == name)

        declared = sorted(self._state.declared.items())
        return [source for source, hosts in declared if any(names(entry) for entry in hosts)]

    def effective(self, principal: Principal | str | None) -> dict[str, Any]:
        """What ``principal`` gets from the operator: ``{enabled, allow_any, hosts}`` (base
        and overlay). Hosts a source declared are not in it: they serve that source's
        tools alone (:meth:`declared`)."""
        state, key = self._state, principal_key(principal)
        enabled, hosts = _operator_view(state.operator, key)
        return {
            "enabled": enabled,
            "allow_any": enabled and state.operator.allow_any,
            "hosts": list(hosts),
        }

    def allows(
        self,
        host: str,
        principal: Principal | str | None = None,
        *,
        sources: Iterable[str] = (),
    ) -> bool:
        """Whether ``principal`` may reach ``host`` for a tool of ``sources`` (the sources
        whose declarations count; none: the operator's policy alone). An unparsable host
        is never allowed."""
        return not self.refused([host], principal, sources=sources)

    @staticmethod
    def _allows(state: _State, host: str, key: str | None, sources: tuple[str, ...]) -> bool:
        declared = (entry for source in sources for entry in state.declared.get(source, ()))
        if any(_covers(entry, host) for entry in declared):
            return True
        enabled, hosts = _operator_view(state.operator, key)
        if not enabled:
            return False
        return state.operator.allow_any or any(_covers(entry, host) for entry in hosts)

    def refused(
        self,
        hosts: Iterable[str],
        principal: Principal | str | None,
        *,
        sources: Iterable[str] = (),
    ) -> list[str]:
        """The hosts of ``hosts`` ``principal`` may not reach, in order (one snapshot), for
        a tool whose declarations are those of ``sources``."""
        state, key, mine = self._state, principal_key(principal), tuple(sources)
        refused = []
        for host in hosts:
            try:
                wanted = egress_host(host)
            except ValueError:
                refused.append(host)
                continue
            if not self._allows(state, wanted, key, mine):
                refused.append(host)
        return refused

    def denial(self, host: str, principal: Principal | str | None, *, what: str) -> dict[str, Any]:
        """``{code, message, details}`` of refusing ``what`` (a tool) ``host``: the message
        says why and names the operator route that allows it from now on."""
        key = principal_key(principal)
        enabled, _ = _operator_view(self._state.operator, key)
        who = f"principal {key!r}" if key else "this registry"
        why = "is not on the egress allowlist" if enabled else f"egress is off for {who}"
        body = {"host": host, **({"principal": key} if key else {})}
        message = (
            f"{what} may not reach {host}: {why}; an operator can allow it from now on with "
            f"POST {ALLOW_ROUTE} {json.dumps(body)}"
        )
        return {
            "code": "TOOL_EGRESS_DENIED",
            "message": message,
            "details": {"host": host, "principal": key, "route": ALLOW_ROUTE},
        }

    def check(self, host: str, principal: Principal | str | None, *, what: str) -> None:
        """For an adapter about to dial ``host`` (give ``host:port``) for whatever its caller
        names (``http_fetch``): raise :class:`ToolFailure` ``TOOL_EGRESS_DENIED`` (pointing
        at the route, naming ``host`` as given) unless the operator's policy allows it.
        No source's declaration counts here: a source's hosts serve its own tools."""
        if not self.allows(host, principal):
            denial = self.denial(host, principal, what=what)
            raise ToolFailure(denial["code"], denial["message"], details=denial["details"])

    def snapshot(self) -> dict[str, Any]:
        """The whole policy for ``GET /api/egress``: the operator part, where it came from,
        each principal's effective view and each source's declared hosts."""
        state = self._state
        return {
            **state.operator.document(),
            "origin": state.origin,
            "persisted": str(self._path) if self._path is not None else None,
            "effective": {
                "base": self.effective(None),
                **{key: self.effective(key) for key in PRINCIPAL_KEYS},
            },
            "declared": self.declared(),
        }

    # -- sources -------------------------------------------------------------------------

    def declare(self, source_id: str, hosts: Iterable[str]) -> list[str]:
        """Make ``hosts`` (host entries or ``scheme://host:port`` origins) reachable for
        the tools of source ``source_id`` while it lives, replacing whatever it declared
        before (a replaced bundle's old host is gone); returns the canonical hosts. An
        empty list retracts. ``ValueError`` for a bad id or host (nothing changes)."""
        _check_source(source_id)
        canonical = _hosts(hosts, source_host)
        with self._lock:
            declared = dict(self._state.declared)
            before = declared.get(source_id, ())
            if canonical:
                declared[source_id] = canonical
            else:
                declared.pop(source_id, None)
            if before == canonical:
                return list(canonical)
            self._state = replace(self._state, declared=declared)
            self._record("declare", source_id, f"{source_id}: {','.join(canonical) or '-'}")
        return list(canonical)

    def retract(self, source_id: str) -> bool:
        """Remove every host ``source_id`` declared; whether it had declared any. A host
        another live source also declared stays reachable through that one."""
        with self._lock:
            if source_id not in self._state.declared:
                return False
            declared = {k: v for k, v in self._state.declared.items() if k != source_id}
            self._state = replace(self._state, declared=declared)
            self._record("retract", source_id, source_id)
        return True

    # -- the operator --------------------------------------------------------------------

    def configure(self, settings: EgressSettings, *, path: Path | None = None) -> None:
        """Start from ``settings`` (the config file's section) or, when ``path`` holds an
        earlier operator change, from that file; later changes are persisted to ``path``.
        :class:`Unprocessable` ``EGRESS_FILE_INVALID`` for a file that cannot be read."""
        origin: Literal["settings", "file"] = "settings"
        if path is not None and path.exists():
            settings, origin = _load(path), "file"
            logger.info("egress policy from %s (it replaces the config's egress section)", path)
        with self._lock:  # the start, not a change: logged, not audited
            self._path = path
            self._state = replace(self._state, operator=settings, origin=origin)

    def allow(self, host: str, principal: str | None = None, *, by: str) -> EgressSettings:
        """Allow this host from now on: switch egress on for ``principal`` (its overlay;
        ``None``: the base) and add ``host``; idempotent. :class:`InvalidRequest`
        ``EGRESS_INVALID`` for a bad host or principal."""
        wanted = _route_host(host)
        key = _route_principal(principal)

        def change(current: EgressSettings) -> EgressSettings:
            if key is None:
                return current.model_copy(
                    update={"enabled": True, "hosts": _hosts((*current.hosts, wanted))}
                )
            overlay = current.principals.get(key, PrincipalEgress())
            overlay = PrincipalEgress(enabled=True, hosts=_hosts((*overlay.hosts, wanted)))
            return current.model_copy(update={"principals": {**current.principals, key: overlay}})

        return self._change(change, by, f"allow {wanted} for {key or '(base)'}")

    def remove(self, host: str, principal: str | None = None, *, by: str) -> EgressSettings:
        """Take ``host`` off the base list and every overlay (only ``principal``'s overlay
        when one is named). ``LookupError`` when the operator had not allowed it there (the
        route answers 404); hosts a live source declared are not the operator's to remove."""
        wanted = _route_host(host)
        key = _route_principal(principal)

        def change(current: EgressSettings) -> EgressSettings:
            base = current.hosts
            if key is None:
                base = tuple(h for h in base if h != wanted)
            overlays = {
                name: PrincipalEgress(
                    enabled=overlay.enabled,
                    hosts=tuple(h for h in overlay.hosts if h != wanted or key not in (None, name)),
                )
                for name, overlay in current.principals.items()
            }
            updated = current.model_copy(update={"hosts": base, "principals": overlays})
            if updated == current:
                raise LookupError(wanted)
            return updated

        return self._change(change, by, f"remove {wanted} from {key or '(all)'}")

    def replace_operator(self, settings: EgressSettings, *, by: str) -> EgressSettings:
        """Replace the whole operator part (``PUT /api/egress``)."""
        return self._change(lambda _current: settings, by, "replace")

    def _change(self, change: Any, by: str, summary: str) -> EgressSettings:
        with self._lock:
            updated: EgressSettings = change(self._state.operator)
            if self._path is not None:
                _save(self._path, updated)
            self._state = replace(self._state, operator=updated, origin="route")
            self._record("operator", by, summary)
        return updated

    def _record(self, action: str, by: str, summary: str) -> None:
        """One audit record per change: what changed rides the record's name (the audit's
        fixed fields carry no free details)."""
        if self._audit is None:
            return
        self._audit.record(
            request_id=None,
            name=f"egress.{action} {summary}"[:200],
            principal_id=by[:200],
            scope="ui" if action == "operator" else "registry",
            state="completed",
            error_code=None,
            duration_s=0.0,
        )


def _operator_view(operator: EgressSettings, key: str | None) -> tuple[bool, tuple[str, ...]]:
    """``(enabled, hosts)`` of ``key``: the base overlaid by its principal's entry."""
    overlay = next((entry for name, entry in operator.principals.items() if name == key), None)
    if overlay is None:
        return operator.enabled, operator.hosts
    enabled = operator.enabled if overlay.enabled is None else overlay.enabled
    extra = tuple(host for host in overlay.hosts if host not in operator.hosts)
    return enabled, (*operator.hosts, *extra)


def _check_source(source_id: str) -> None:
    if not isinstance(source_id, str) or not re.fullmatch(_SOURCE_ID, source_id):
        raise ValueError(f"source id {str(source_id)[:80]!r} must match {_SOURCE_ID}")


def _route_host(host: Any) -> str:
    try:
        return egress_host(host)
    except ValueError as exc:
        raise InvalidRequest("EGRESS_INVALID", f"host: {exc}", details={"field": "host"}) from None


def _route_principal(principal: Any) -> PrincipalKey | None:
    if principal is None:
        return None
    known = next((key for key in PRINCIPAL_KEYS if key == principal), None)
    if known is None:
        raise InvalidRequest(
            "EGRESS_INVALID",
            f"principal: {str(principal)[:40]!r} is not one of {', '.join(PRINCIPAL_KEYS)}",
            details={"field": "principal", "allowed": list(PRINCIPAL_KEYS)},
        )
    return known


def _load(path: Path) -> EgressSettings:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return parse_egress(data.get("egress") if isinstance(data, dict) else data)
    except (OSError, ValueError, InvalidRequest) as exc:
        why = exc.message if isinstance(exc, InvalidRequest) else str(exc)[:200]
        raise Unprocessable(
            "EGRESS_FILE_INVALID",
            f"{path}: cannot use the saved egress policy ({why}); fix the file or delete it "
            "to start from the config file's egress section",
            details={"path": str(path)},
        ) from None


def _save(path: Path, settings: EgressSettings) -> None:
    document = {"version": 1, "egress": settings.document()}
    atomic_write_text(path, json.dumps(document, indent=2, sort_keys=True) + "\n")
