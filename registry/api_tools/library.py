"""The API-tool bundles of one server: saved, registered, replaced, deleted, all live.

:class:`ApiTools` owns the bundle store, the tools each bundle registers on the registry
service and the egress origin it declares for them. A save is checked before anything is written
(validation, the outbound policy, credentials by name and scope, tool names free); a delete
tombstones the file, unregisters the tools and retracts the hosts, so the next catalog read
(and its ETag) no longer has them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from doraforge.registry.api_tools.bundle import SECRET_SLOT, Bundle
from doraforge.registry.api_tools.client import ApiClient
from doraforge.registry.api_tools.errors import Conflict, NotFound
from doraforge.registry.api_tools.outbound import OutboundPolicy, Resolver
from doraforge.registry.api_tools.store import BundleStore
from doraforge.registry.api_tools.tools import build_tools, check_saveable, tool_name
from doraforge.registry.credentials import SecretView

if TYPE_CHECKING:
    from doraforge.registry.service import RegistryService

_NAME = re.compile(r"^[a-z][a-z0-9]*(_[a-z0-9]+)*$")


def check_service_name(name: str) -> None:
    """:class:`NotFound` ``API_BUNDLE_NOT_FOUND`` for a name no bundle can have."""
    if not _NAME.match(name):
        raise NotFound("API_BUNDLE_NOT_FOUND", f"no API service {name[:80]!r}")


def referenced_credentials(bundle: Bundle) -> list[str]:
    """Every credential name ``bundle`` declares or fills a ``{{secret:NAME}}`` slot with."""
    slots = [ref for value in bundle.headers.values() for ref in SECRET_SLOT.findall(value)]
    return sorted({*bundle.credentials, *slots})


def check_credentials(bundle: Bundle, secrets: SecretView) -> None:
    """Refuse a bundle naming a credential that is not set (``API_TOOL_CREDENTIAL_MISSING``)
    or set in another scope than the service's (``API_TOOL_CREDENTIAL_SCOPE``): a service
    saved that way would fail every call. Services are global; so must their credentials be."""
    names = referenced_credentials(bundle)
    missing = [name for name in names if secrets.scope_of(name) is None]
    if missing:
        raise Conflict(
            "API_TOOL_CREDENTIAL_MISSING",
            f"credentials not set: {missing}; set each with PUT /api/credentials/NAME "
            "(or doraforge credentials set NAME) and save again",
            details={"credentials": missing},
        )
    foreign = [name for name in names if secrets.scope_of(name) != "global"]
    if foreign:
        raise Conflict(
            "API_TOOL_CREDENTIAL_SCOPE",
            f"a global service may reference global credentials only: {foreign}",
            details={"credentials": foreign, "scope": "global"},
        )


class ApiTools:
    """The API-tool bundles of one server: persisted in ``store_dir``, registered as
    registry tools on ``service``, dialled through one client under ``policy``, their
    ``{{secret:NAME}}`` slots filled from ``secrets`` (a :class:`SecretView`, or a plain
    mapping taken as global read-only values).

    Construction registers every bundle already stored; :meth:`save` persists and
    (re)registers one, :meth:`delete` tombstones and unregisters one."""

    def __init__(
        self,
        store_dir: Path,
        service: RegistryService,
        policy: OutboundPolicy,
        secrets: Mapping[str, str],
        *,
        resolver: Resolver | None = None,
    ) -> None:
        self.service, self.policy = service, policy
        self.secrets = secrets if isinstance(secrets, SecretView) else SecretView(None, secrets)
        self.store = BundleStore(store_dir)
        self.client = ApiClient(policy, resolver=resolver)
        self.bundles: dict[str, Bundle] = {}
        for bundle in self.store.load_all():
            self.install(bundle)

    def get(self, name: str) -> Bundle:
        """The bundle named ``name``; :class:`NotFound` API_BUNDLE_NOT_FOUND otherwise."""
        check_service_name(name)
        if name not in self.bundles:
            raise NotFound("API_BUNDLE_NOT_FOUND", f"no API service {name!r}")
        return self.bundles[name]

    def check_free(self, bundle: Bundle) -> None:
        """Refuse up front a bundle that cannot be installed, before anything is written."""
        if bundle.name in self.bundles:
            return  # a replacement: install() unregisters the old tools first
        names = [tool_name(bundle, t) for t in bundle.tools]
        taken = [name for name in names if self.service.resolve(name) is not None]
        if taken:
            raise Conflict(
                "TOOL_REGISTRATION_CONFLICT",
                f"tool names already registered: {taken}",
                details={"names": taken},
            )

    def check(self, bundle: Bundle) -> None:
        """Every save-time check, nothing written: the outbound policy may dial the host
        (``API_TOOL_HOST_NOT_ALLOWED``), the credentials exist in the service's scope, and
        the tool names are free."""
        check_saveable(bundle, self.policy)
        check_credentials(bundle, self.secrets)
        self.check_free(bundle)

    def install(self, bundle: Bundle) -> None:
        """Register ``bundle``'s tools, replacing those of a bundle of the same name."""
        self.check_free(bundle)
        self.uninstall(bundle.name)
        pairs = build_tools(bundle, secrets=self.secrets, policy=self.policy, client=self.client)
        for entry, adapter in pairs:
            self.service.register(entry, adapter, source=egress_source(bundle.name))
        self._declare_egress(bundle)
        self.bundles[bundle.name] = bundle

    def uninstall(self, name: str) -> None:
        """Unregister ``name``'s tools and retract its hosts (nothing when not installed)."""
        old = self.bundles.pop(name, None)
        if old is None:
            return
        for tool in old.tools:
            self.service.unregister(tool_name(old, tool))
        self._retract_egress(old)

    def save(self, bundle: Bundle) -> bool:
        """Check, persist and install ``bundle``; whether it is new (not a replacement).
        Raises :class:`Conflict` for a host never dialled, a credential missing or of
        another scope, or a tool name taken."""
        self.check(bundle)
        created = bundle.name not in self.bundles
        self.store.save(bundle)
        self.install(bundle)
        return created

    def delete(self, name: str) -> Bundle:
        """Soft-delete ``name``: its file tombstoned (restorable by saving again), its tools
        unregistered, its egress hosts retracted; :class:`NotFound` when not live."""
        bundle = self.get(name)
        self.store.delete(name)
        self.uninstall(name)
        return bundle

    def _declare_egress(self, bundle: Bundle) -> None:
        # The base origin (scheme, host and port) passed the outbound policy when the
        # bundle was saved; it serves this bundle's tools only, never another port of the
        # host nor another tool. Declaring it again under the same source replaces what a
        # previous version declared.
        self.service.egress.declare(egress_source(bundle.name), [bundle.origin])

    def _retract_egress(self, bundle: Bundle) -> None:
        self.service.egress.retract(egress_source(bundle.name))


def egress_source(name: str) -> str:
    """The egress source id of service ``name``: ``api:<service>``."""
    return f"api:{name}"
