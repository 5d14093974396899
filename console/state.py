"""What the console's routes read: the home, the registry's robot tools, Gateway clients.

One :class:`Console` per server, kept as ``app.state.console``. Gateway clients are keyed
by the URL the skill's runtime recorded at start and present the token that start wrote
(``token_for``), so the browser never sees either.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
from starlette.requests import HTTPConnection

from doraforge.paos.client import ForgeToolClient, TokenLookup
from doraforge.paos.client_cache import GatewayClients
from doraforge.paos.gateway_auth import bearer
from doraforge.paos.home import PaosHome
from doraforge.registry.robot_tools import RobotTools

#: Invocations the console admitted and still shows; older ones are read on the Gateway.
MAX_TRACKED_INVOCATIONS = 50
#: A frame or a state read that takes longer than this is shown as stale, not waited for.
GATEWAY_TIMEOUT_S = 5.0

type RuntimeFactory = Callable[[], Any]


@dataclass(frozen=True)
class Admitted:
    """One Action or Session the console admitted on a skill's Gateway."""

    skill: str
    tool_id: str
    semantics: str
    invocation_id: str
    caller_id: str
    admitted_at_ms: int


@dataclass
class Console:
    """The console's shared state: ``robot`` resolves skills to their recorded Gateways
    and opens the task store, ``runtime`` builds the home's RuntimeManager, ``token_for``
    names the token of a running skill's Gateway URL."""

    home: PaosHome
    robot: RobotTools
    runtime: RuntimeFactory
    token_for: TokenLookup
    admitted: deque[Admitted] = field(
        default_factory=lambda: deque(maxlen=MAX_TRACKED_INVOCATIONS), repr=False
    )
    _clients: GatewayClients = field(init=False, repr=False)
    _raw: dict[str, httpx.AsyncClient] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        self._clients = GatewayClients(self._new_client)

    def _new_client(self, url: str) -> ForgeToolClient:
        return ForgeToolClient(url, timeout_s=GATEWAY_TIMEOUT_S, token=lambda: self.token_for(url))

    def client(self, url: str) -> ForgeToolClient:
        """The Tool API client of the recorded Gateway ``url``."""
        return self._clients.get(url)

    async def read(self, url: str, path: str) -> httpx.Response:
        """``GET path`` on the Gateway ``url`` for a read the Tool API client does not
        offer (joint state), presenting the runtime's current token."""
        client = self._raw.get(url)
        if client is None:
            client = self._raw[url] = httpx.AsyncClient(
                base_url=url, timeout=GATEWAY_TIMEOUT_S, follow_redirects=False
            )
        return await client.get(path, headers=bearer(self.token_for(url)))

    def track(self, skill: str, tool_id: str, semantics: str, admission: dict[str, Any]) -> None:
        """Remember an admission so the Cell page can show its progress."""
        self.admitted.appendleft(
            Admitted(
                skill=skill,
                tool_id=tool_id,
                semantics=semantics,
                invocation_id=str(admission["invocation_id"]),
                caller_id=str(admission.get("caller_id", "")),
                admitted_at_ms=int(time.time() * 1000),
            )
        )

    async def aclose(self) -> None:
        """Close every Gateway client."""
        await self._clients.aclose()
        raw, self._raw = self._raw, {}
        for client in raw.values():
            await client.aclose()


def console_of(connection: HTTPConnection) -> Console:
    """The console of the app serving ``connection`` (``app.state.console``)."""
    console: Console = connection.app.state.console
    return console
