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

__all__ = ["BuiltinsSettings", "register_builtins"]


def register_builtins(
    service: RegistryService,
    settings: ServerSettings,
    credentials: CredentialStore | None = None,
) -> list[str]:
    """Register the enabled built-ins; returns their canonical names.

    ``credentials`` is where a provider's API key is looked up by name, then the server's
    ``secrets`` (the same :class:`SecretView` API-tool bundles resolve through). Raises
    :class:`~doraforge.registry.settings.SettingsError`
    (``BUILTINS_INVALID``) for a bad ``builtins`` section."""
    config = BuiltinsSettings.parse(settings.builtins)
    names: list[str] = []
    if "calculator" in config.enabled:
        names.append(service.register(calculator.ENTRY, calculator.calculate).name)
    if "http_fetch" in config.enabled:
        policy = OutboundPolicy.model_validate(settings.outbound)
        fetch = http_fetch.HttpFetch(config.http_fetch, policy, service.egress)
        fetch_entry = http_fetch.entry(config.http_fetch)
        names.append(service.register(fetch_entry, fetch, wants_context=True).name)
    if "web_search" in config.enabled:
        secret = SecretView(credentials, settings.secrets).get
        provider = web_search.choose_provider(config.web_search, secret)
        search = web_search.adapter(provider, config.web_search.max_results)
        names.append(service.register(web_search.entry(provider), search).name)
    return names
