"""A Gateway app served by real uvicorn on a loopback socket, in a background thread."""

from __future__ import annotations

import asyncio
import threading
import time

import httpx
import uvicorn

from doraforge.gateway.core import Gateway
from doraforge.gateway.http import create_app
from doraforge.gateway.main import server_config
from doraforge.skill_runtime.dora_run import free_port
from doraforge.wire.guard import TransportPolicy


class LiveServer(httpx.Client):
    """An ``httpx.Client`` bound to a live server for ``gateway``; stops on exit.

    ``policy`` is the transport policy (default: the config's, no token); the client
    itself sends no token, so tests see exactly what an unauthenticated caller gets.
    """

    def __init__(self, gateway: Gateway, *, policy: TransportPolicy | None = None) -> None:
        self.port = free_port()
        super().__init__(base_url=f"http://127.0.0.1:{self.port}", timeout=10)
        app = create_app(gateway, policy)
        self._server = uvicorn.Server(server_config(app, "127.0.0.1", self.port))
        self._gateway = gateway
        self._thread = threading.Thread(target=self._run, daemon=True)

    def ws_url(self, path: str) -> str:
        """The ``ws://`` URL of ``path`` on this server."""
        return f"ws://127.0.0.1:{self.port}{path}"

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._gateway.observations.bind_loop(loop)
        loop.run_until_complete(self._server.serve())
        loop.close()

    def __enter__(self) -> LiveServer:
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("the live server did not start")
            time.sleep(0.01)
        super().__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        super().__exit__(*exc)
        self._server.should_exit = True
        self._thread.join(timeout=10)
