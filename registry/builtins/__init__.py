"""Built-in tools: ``builtin.calculator``, ``builtin.http_fetch``, ``builtin.web_search``.

They are registered into the same catalog and pass the same gates as every other tool
(grants, permissions, approvals, egress, idempotency, audit): the calculator is low risk
and needs nothing; ``http_fetch`` and ``web_search`` need the ``network:*`` permission,
``http_fetch`` is high risk (an operator approves each call without a standing rule) and
``web_search`` medium. The ``builtins`` settings section says which are enabled and how
web search reaches its provider (:mod:`doraforge.registry.builtins.config`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from doraforge.registry.api_tools.outbound import OutboundPolicy
from doraforge.registry.builtins import calculator, http_fetch, web_search
from doraforge.registry.builtins.config import BuiltinsSettings
from doraforge.registry.credentials import SecretView

if TYPE_CHECKING:
    from doraforge.registry.credentials import CredentialStore
    from doraforge.registry.service import RegistryService
    from doraforge.registry.settings import ServerSettings

__all__ = ["NAMES", "Builtins", "BuiltinsSettings", "register_builtins"]


#: Every built-in by its short name (``builtins.enabled`` and ``/api/builtins/{name}``).
NAMES = ("calculator", "http_fetch", "web_search")


class Builtins:
    """The built-ins of one server: which are in the catalog now, switched on and off live.

    Built from the ``builtins`` settings section once; :meth:`enable` registers one (a
    no-op when it is already there), :meth:`disable` unregisters it (its retained results
    stay readable). Raises :class:`~doraforge.registry.settings.SettingsError`
    (``BUILTINS_INVALID``) for a bad section."""

    def __init__(
        self,
        service: RegistryService,
        settings: ServerSettings,
        credentials: CredentialStore | None = None,
    ) -> None:
        self._service = service
        self._settings = settings
        self._credentials = credentials
        self._config = BuiltinsSettings.parse(settings.builtins)
        self._registered: dict[str, str] = {}

    def enable_configured(self) -> None:
        """Register every built-in the settings enable."""
        for name in NAMES:
            if name in self._config.enabled:
                self.enable(name)

    def enable(self, name: str) -> str:
        """Put the built-in ``name`` (one of :data:`NAMES`) in the catalog; its canonical
        name."""
        if name not in self._registered:
            self._registered[name] = self._register(name)
        return self._registered[name]

    def disable(self, name: str) -> bool:
        """Take ``name`` out of the catalog; whether it was in it."""
        canonical = self._registered.pop(name, None)
        if canonical is None:
            return False
        self._service.unregister(canonical)
        return True

    def states(self) -> list[dict[str, object]]:
        """Each built-in: its short and canonical names, whether it is in the catalog."""
        return [
            {"name": name, "tool": f"builtin.{name}", "enabled": name in self._registered}
            for name in NAMES
        ]

    def _register(self, name: str) -> str:
        service, config, settings = self._service, self._config, self._settings
        if name == "calculator":
            return service.register(calculator.ENTRY, calculator.calculate).name
        if name == "http_fetch":
            policy = OutboundPolicy.model_validate(settings.outbound)
            fetch = http_fetch.HttpFetch(config.http_fetch, policy, service.egress)
            entry = http_fetch.entry(config.http_fetch)
            return service.register(entry, fetch, wants_context=True).name
        secret = SecretView(self._credentials, settings.secrets).get
        provider = web_search.choose_provider(config.web_search, secret)
        search = web_search.adapter(provider, config.web_search.max_results)
        return service.register(web_search.entry(provider), search).name


def register_builtins(
    service: RegistryService,
    settings: ServerSettings,
    credentials: CredentialStore | None = None,
) -> Builtins:
    """Register the built-ins the ``builtins`` section enables (all three by default).

    ``credentials`` is where a provider's API key is looked up by name, then the server's
    ``secrets`` (the same :class:`SecretView` API-tool bundles resolve through). Raises
    :class:`~doraforge.registry.settings.SettingsError` (``BUILTINS_INVALID``) for a bad
    ``builtins`` section."""
    builtins = Builtins(service, settings, credentials)
    builtins.enable_configured()
    return builtins
