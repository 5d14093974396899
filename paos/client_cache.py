"""One shared HTTP client per Gateway, and a bound on how many are kept.

A :class:`~paos.client.ForgeToolClient` holds a connection pool and a TLS context, so a
client per call is wasteful and a client per URL kept forever grows without limit (3,000
distinct URLs once took a registry from 132 MiB to 2.58 GiB). :class:`GatewayClients`
keeps at most ``max_clients``, the least recently used evicted and closed.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Callable

from doraforge.paos.client import ForgeToolClient

#: Far above the Gateways one PAOS home or registry fronts (one per running skill or cell).
DEFAULT_MAX_CLIENTS = 32

type ClientFactory = Callable[[str], ForgeToolClient]


class GatewayClients:
    """Clients by Gateway URL, least recently used first, at most ``max_clients`` of them.

    :meth:`get` returns the one client of a URL, creating it with ``factory`` on first
    use. Going over the bound evicts the least recently used client and closes it in the
    background; a request still running on it then fails as a transport error (remote
    state unknown, never re-sent), which is why the bound sits well above the number of
    Gateways in use at once. :meth:`aclose` closes every client, evicted ones included.
    """

    def __init__(self, factory: ClientFactory, *, max_clients: int = DEFAULT_MAX_CLIENTS) -> None:
        if max_clients < 1:
            raise ValueError("max_clients must be at least 1")
        self._factory = factory
        self._max = max_clients
        self._clients: OrderedDict[str, ForgeToolClient] = OrderedDict()
        self._retired: list[ForgeToolClient] = []
        self._closing: set[asyncio.Task[None]] = set()

    def __len__(self) -> int:
        return len(self._clients)

    def __contains__(self, url: object) -> bool:
        return url in self._clients

    def get(self, url: str) -> ForgeToolClient:
        """The client of ``url`` (created on first use), now the most recently used."""
        client = self._clients.get(url)
        if client is not None:
            self._clients.move_to_end(url)
            return client
        client = self._clients[url] = self._factory(url)
        while len(self._clients) > self._max:
            _url, evicted = self._clients.popitem(last=False)
            self._retire(evicted)
        return client

    def _retire(self, client: ForgeToolClient) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop to close it on now: aclose() will
            self._retired.append(client)
            return
        task = loop.create_task(client.aclose())
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    async def aclose(self) -> None:
        """Close every client, wait for evicted ones still closing, and forget them all."""
        clients = [*self._clients.values(), *self._retired]
        self._clients.clear()
        self._retired.clear()
        for client in clients:
            await client.aclose()
        if self._closing:
            await asyncio.gather(*self._closing)
