"""The Gateway Dora node: HTTP server on the main thread, Dora events on another.

Environment and command line are read here and nowhere else.

The invocation journal belongs to one run, never to the machine: ``--journal``, else the
config's ``journal_path`` (the author's explicit choice), else
``$DORAFORGE_GATEWAY_JOURNAL`` (how ``doraforge run`` and the Skill Runtime place it in
the run's own state directory), else ``out/<dataflow id>/<gateway_id>.journal`` beside
Dora's own logs of this run, so a Gateway that Dora restarts inside the run finds its
journal and a new run never restores an unrelated one.

On Dora's STOP the HTTP server gets :data:`SHUTDOWN_GRACE_S` to finish open responses:
an event stream or a WebSocket a client keeps open must not hold the dataflow's stop.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import re
import sys
import threading
from collections.abc import Mapping
from pathlib import Path

import uvicorn
from starlette.types import ASGIApp

from doraforge.gateway.carrier import DoraCarrier
from doraforge.gateway.config import GatewayConfig, load_config
from doraforge.gateway.core import Gateway
from doraforge.gateway.errors import ConfigError
from doraforge.gateway.http import create_app, gateway_policy
from doraforge.gateway.journal import FileJournal
from doraforge.wire.guard import BindRefused, TransportPolicy, is_loopback
from doraforge.wire.tokens import TokenError, load_token

log = logging.getLogger("gateway")

#: Seconds open HTTP responses (event streams above all) get once Dora says STOP.
SHUTDOWN_GRACE_S = 1
#: The Gateway's own Dora shared-memory pool, unless ``DORA_NODE_SHM_POOL_SIZE`` or the
#: node's ``shared_memory_pool_size`` says otherwise. It only sends ToolMessages (at most
#: the 1 MiB body limit, and under Dora's 4 KiB zero-copy threshold almost always), so
#: Dora's 8 MiB default would only add resident pages (issue 16: at most 150 MiB RSS).
SHM_POOL_BYTES = 2 * 1024 * 1024
#: The run's id in the node config Dora hands every node (``DORA_NODE_CONFIG``).
_DATAFLOW_ID = re.compile(r"dataflow_id:\s*['\"]?([0-9A-Fa-f-]{36})")


def _arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="doraforge-gateway", description=__doc__)
    parser.add_argument("--config", required=True, help="Gateway YAML configuration")
    parser.add_argument("--port", type=int, help="override the configured HTTP port")
    parser.add_argument("--journal", help="override the invocation journal path")
    return parser.parse_args(argv)


def journal_path(
    config: GatewayConfig,
    override: str | None,
    *,
    environ: Mapping[str, str],
    cwd: Path,
) -> Path:
    """Where the journal lives: ``override`` (``--journal``), the config's
    ``journal_path``, ``$DORAFORGE_GATEWAY_JOURNAL``, then this run's ``out/`` folder
    (``out/<dataflow id>/`` under ``cwd``, the dataflow's folder, where Dora keeps the
    run's logs; ``out/`` alone when the node config names no run)."""
    chosen = override or config.journal_path or environ.get("DORAFORGE_GATEWAY_JOURNAL")
    if chosen:
        return Path(chosen)
    found = _DATAFLOW_ID.search(environ.get("DORA_NODE_CONFIG", ""))
    run = cwd / "out" / found.group(1) if found else cwd / "out"
    return run / f"{config.gateway_id}.journal"


def main(argv: list[str] | None = None) -> int:
    """Run the Gateway node until Dora stops it."""
    logging.basicConfig(
        level=os.environ.get("DORAFORGE_LOG_LEVEL", "INFO"),
        format="%(levelname)s %(name)s: %(message)s",
    )
    args = _arguments(argv)
    try:
        config = load_config(args.config)
    except ConfigError as exc:
        print(f"doraforge-gateway: {exc}", file=sys.stderr)
        return 2
    port = args.port or _env_int("DORAFORGE_GATEWAY_PORT") or config.port
    path = journal_path(config, args.journal, environ=os.environ, cwd=Path.cwd())
    try:
        policy = transport_policy(config, os.environ)
    except (TokenError, BindRefused) as exc:
        print(f"doraforge-gateway: {exc}", file=sys.stderr)
        return 2
    return run(config, port=port, journal=path, policy=policy)


def transport_policy(config: GatewayConfig, environ: Mapping[str, str]) -> TransportPolicy:
    """The edge's policy with the token the config names, or the token file
    ``DORAFORGE_GATEWAY_TOKEN_FILE`` names (how the Skill Runtime hands a started skill its
    token). Raises ``TokenError`` or ``BindRefused`` for a configuration that must not run."""
    security = config.security
    token_file = None
    if security.token_env is None:
        token_file = security.token_file or environ.get("DORAFORGE_GATEWAY_TOKEN_FILE") or None
    token = load_token(env=security.token_env, file=token_file, environ=environ)
    return gateway_policy(config, token)


def _env_int(name: str) -> int | None:
    value = os.environ.get(name)
    return int(value) if value else None


def run(config: GatewayConfig, *, port: int, journal: Path, policy: TransportPolicy) -> int:
    """Serve HTTP and pump Dora events until STOP, then shut down cleanly."""
    from dora import Node  # imported here so the package imports without a Dora runtime

    os.environ.setdefault("DORA_NODE_SHM_POOL_SIZE", str(SHM_POOL_BYTES))  # read by Node()
    node = Node()
    loop = new_loop()
    carrier = DoraCarrier(node, config.providers, max_message_bytes=config.max_body_bytes)
    gateway = Gateway(config, send=carrier.send, journal=FileJournal(journal))
    server = uvicorn.Server(server_config(create_app(gateway, policy), config.host, port))

    def stop() -> None:
        server.should_exit = True

    pump = threading.Thread(
        target=carrier.pump,
        args=(loop, gateway.on_message, stop, gateway.observations.on_input),
        name="dora-events",
        daemon=True,
    )
    pump.start()
    log.info(
        "gateway %s starting HTTP on http://%s:%d (journal %s, %s)",
        config.gateway_id,
        config.host,
        port,
        journal,
        "bearer token required" if policy.token else "no token: loopback only",
    )
    warn_if_unauthenticated(config, policy)
    loop.run_until_complete(_serve(gateway, server))
    return 0 if server.started else 1


def warn_if_unauthenticated(config: GatewayConfig, policy: TransportPolicy) -> None:
    """Say at WARNING, so a skill profile's quieter log level keeps it, that a loopback
    Gateway started without a token (by PhyAgentOS's RuntimeManager or a bare ``dora run``:
    only doraforge's Skill Runtime hands each start one) lets any local process drive it.
    A non-loopback bind without a token is refused, or logged as INSECURE, by the guard."""
    if policy.token is not None or not is_loopback(config.host):
        return
    log.warning(
        "gateway %s: no bearer token, so any local process may call it (loopback bind %s); "
        "start it with doraforge skill start to require one",
        config.gateway_id,
        config.host,
    )


def server_config(app: ASGIApp, host: str, port: int) -> uvicorn.Config:
    """The HTTP server settings of the Gateway (also used by the benchmark's HTTP floor)."""
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="warning",
        http="httptools",
        lifespan="off",
        access_log=False,
        proxy_headers=False,  # a loopback service; no proxy may rewrite client addresses
        server_header=False,
        timeout_graceful_shutdown=SHUTDOWN_GRACE_S,
    )


async def _serve(gateway: Gateway, server: uvicorn.Server) -> None:
    await gateway.start()
    try:
        await server.serve()
    finally:
        await gateway.stop()


def new_loop() -> asyncio.AbstractEventLoop:
    """A uvloop event loop when available, set as the current loop."""
    try:
        import uvloop
    except ImportError:  # uvloop is optional on platforms without it
        loop = asyncio.new_event_loop()
    else:
        loop = uvloop.new_event_loop()
    asyncio.set_event_loop(loop)
    return loop


if __name__ == "__main__":
    sys.exit(main())
