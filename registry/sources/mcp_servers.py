"""Third-party MCP servers as tool sources: each server's tools become registry tools.

One :class:`McpSource` per configured server runs it through its execution tier
(``registry.sources.tiers``), holds one official-SDK ``ClientSession`` over ``stdio_client``,
lists its tools and registers each as ``mcp__<server>__<tool>``: an ordinary registered
tool, so every call passes every gate (grants, approvals, schema, egress, deadline, audit)
before it is forwarded as ``tools/call``. ``notifications/tools/list_changed`` re-lists and
re-registers (the catalog ETag changes). A dead process, or a call that outlives its
deadline (the process group is then killed), makes the server ``unavailable``: its tools
answer ``MCP_SOURCE_UNAVAILABLE`` while it restarts with exponential backoff.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import re
import time
from collections.abc import Callable, Mapping
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol, TextIO

import anyio
import mcp.types as types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp import ClientSession, McpError, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.message import SessionMessage

from doraforge.registry.errors import RegistryError, ToolFailure
from doraforge.registry.gates import Denied
from doraforge.registry.model import Principal
from doraforge.registry.sources.config import CredentialRef, McpServerConfig, server_run_as
from doraforge.registry.sources.tiers import LaunchSpec, Limits, Tier

logger = logging.getLogger(__name__)

type State = Literal["starting", "ready", "unavailable", "failed", "stopped"]
type Inbox = MemoryObjectReceiveStream[SessionMessage | Exception]

MAX_TOOLS = 500
MAX_PROVIDER = 64
BACKOFF_FIRST_S = 0.5
BACKOFF_MAX_S = 30.0
#: A connection that stayed up this long resets the backoff to its first step.
HEALTHY_S = 60.0
#: How long a stop waits for the SDK's own stdio shutdown (2 s grace, then the signals).
STOP_WAIT_S = 8.0
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


class Credentials(Protocol):
    """A credential store by name (``registry.credentials.CredentialStore``)."""

    def get(self, name: str, /) -> str | None: ...


@dataclass(frozen=True)
class Runtime:
    """What sources start with: the execution tiers by number and how a bounded stderr log
    is opened (``registry.sources.logs``)."""

    tiers: Mapping[int, Tier]
    open_errlog: Callable[[Path], TextIO]


def names(server: str, tool: str) -> tuple[str, str]:
    """``(canonical, provider)`` names of ``tool`` of ``server``: ``mcp__<server>__<tool>``
    with characters outside ``[A-Za-z0-9_-]`` made ``_``, lower-cased for the canonical
    name; a provider name over 64 characters keeps a prefix and a hash of the whole."""
    provider = f"mcp__{server}__{_UNSAFE.sub('_', tool)}"
    if len(provider) > MAX_PROVIDER:
        digest = hashlib.sha256(tool.encode()).hexdigest()[:8]
        provider = f"{provider[: MAX_PROVIDER - 9]}_{digest}"
    return provider.lower(), provider


def closed_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """The registry's closed form of an MCP input schema: an object schema with
    ``additionalProperties: false``. A schema that left extra properties open (absent or
    ``true`` or a sub-schema) is closed to its declared properties, said in ``$comment``:
    an argument the server did not declare is refused at the gate rather than forwarded."""
    closed = dict(schema)
    if closed.get("type") != "object":
        raise ValueError("the input schema is not an object schema")
    if closed.get("additionalProperties") is not False:
        closed["additionalProperties"] = False
        closed["$comment"] = "closed by doraforge: only the declared properties are passed"
    closed.setdefault("properties", {})
    return closed


def tool_entry(server: str, config: McpServerConfig, tool: types.Tool) -> dict[str, Any]:
    """The registry entry of one MCP tool; annotations decide the side effect (read only
    with ``readOnlyHint: true``) and a tool without annotations is a high-risk write."""
    canonical, provider = names(server, tool.name)
    hints = tool.annotations
    read = hints is not None and hints.readOnlyHint is True
    idempotent = read or (hints is not None and hints.idempotentHint is True)
    output = tool.outputSchema if (tool.outputSchema or {}).get("type") == "object" else None
    text = tool.description or tool.title or f"The {tool.name} tool"
    return {
        "name": canonical,
        "providerName": provider,
        "description": f"{text.strip()[:3900]} (MCP server {server})",
        "input_schema": closed_schema(tool.inputSchema),
        "output_schema": output or {"type": "object"},
        "policy": {
            "scopes": ["agent", "ui"],
            "requiredCapabilities": config.required_grants(server),
            "sideEffect": "read" if read else "write",
            "idempotent": idempotent,
            "risk": config.risk if hints is not None else "high",
            "confirmation": config.confirmation,
            "egressHosts": list(config.egressHosts),
            "timeoutMs": config.timeoutMs,
        },
    }


async def _call_tool(
    session: ClientSession, tool: str, arguments: dict[str, Any]
) -> types.CallToolResult:
    """``tools/call`` without the SDK's own check of the result: ``ClientSession.call_tool``
    validates it with ``jsonschema`` and Python's ``re`` (a backtracking ``pattern`` in the
    server's output schema held the registry's loop for hours); the registry checks every
    result against the compiled schema itself (``registry.gates.validate_output``)."""
    request = types.CallToolRequest(
        params=types.CallToolRequestParams(name=tool, arguments=arguments)
    )
    return await session.send_request(types.ClientRequest(request), types.CallToolResult)


def result_of(server: str, tool: str, result: types.CallToolResult) -> dict[str, Any]:
    """A ``tools/call`` result as the registry's result: its structured content, else
    its text (joined); an ``isError`` result raises :class:`ToolFailure` with the text."""
    text = "\n".join(b.text for b in result.content if isinstance(b, types.TextContent))
    if result.isError:
        raise ToolFailure(
            "MCP_TOOL_ERROR",
            f"{server}/{tool} answered an error: {text[:500] or '(no text)'}",
            details={"server": server, "tool": tool},
        )
    if isinstance(result.structuredContent, dict):
        return result.structuredContent
    others = sorted({b.type for b in result.content if not isinstance(b, types.TextContent)})
    return {"text": text, **({"omitted": others} if others else {})}


class McpSource:
    """One configured MCP server: its process, session, tools and state.

    ``start`` runs it in the background (never raises); ``call`` forwards one tool call;
    ``stop`` closes the session and kills the process group. ``on_tools`` gets the tool
    list each time it is (re)listed, to (re)register it."""

    def __init__(
        self,
        name: str,
        config: McpServerConfig,
        *,
        runtime: Runtime,
        credentials: Credentials,
        home: Path,
        on_tools: Callable[[McpSource, list[types.Tool]], None],
    ) -> None:
        self.name, self.config, self.home = name, config, home
        self._runtime, self._credentials, self._on_tools = runtime, credentials, on_tools
        self.state: State = "stopped"
        self.reason = "not started"
        self.restarts = 0
        self.tools: dict[str, str] = {}  # canonical name -> the server's own tool name
        #: The server's tools the registry would not offer, by their own name: why (code, message).
        self.refused: dict[str, dict[str, str]] = {}
        self._session: ClientSession | None = None
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._relist = asyncio.Event()
        self._ready = asyncio.Event()
        self._stopping = False
        self._backoff = BACKOFF_FIRST_S

    @property
    def log_path(self) -> Path:
        """Where its stderr goes (bounded by the log)."""
        return self.home / "stderr.log"

    def status(self) -> dict[str, Any]:
        """Its row in ``GET /api/sources/mcp``."""
        return {
            "name": self.name,
            "state": self.state,
            "reason": self.reason,
            "tier": self.config.tier,
            "restarts": self.restarts,
            "tools": sorted(self.tools),
            "refused": [{"tool": name, **self.refused[name]} for name in sorted(self.refused)],
            "grants": self.config.required_grants(self.name),
            "egressHosts": list(self.config.egressHosts),
            "log": str(self.log_path),
        }

    def start(self) -> None:
        """Run the server in the background, restarting it whenever it goes down."""
        if self._task is None:
            self.state, self.reason = "starting", "starting"
            self._task = asyncio.get_running_loop().create_task(self._supervise())

    async def wait_ready(self, within_s: float) -> bool:
        """Whether it is ready within ``within_s`` (a bounded wait at start)."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(within_s):
                await self._ready.wait()
        return self.state == "ready"

    async def stop(self) -> None:
        """Close the session and kill its process group; nothing of it outlives this."""
        task, self._task = self._task, None
        self._stopping = True
        self._wake.set()
        if task is not None:
            # The supervisor unwinds the session and the SDK's stdio shutdown (stdin closed,
            # then SIGTERM and SIGKILL to the process group); cancelled only if that hangs.
            done, _ = await asyncio.wait({task}, timeout=STOP_WAIT_S)
            if not done:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        self.state, self.reason, self._session = "stopped", "stopped", None

    def admit(self, principal: Principal | None) -> None:
        """Its tools' availability in the catalog (a catalog read only: a call reaches the
        adapter, which answers the retryable ``MCP_SOURCE_UNAVAILABLE`` failure)."""
        if principal is None and self.state != "ready":
            raise Denied("MCP_SOURCE_UNAVAILABLE", self._unavailable_message())

    async def call(self, tool: str, arguments: dict[str, Any], *, write: bool) -> Any:
        """Forward one call; :class:`ToolFailure` for an error result, an unavailable
        server or one that died mid-call (a write's outcome is then unknown)."""
        session = self._session
        if session is None or self.state != "ready":
            raise self._unavailable(write=False)
        try:
            result = await _call_tool(session, tool, arguments)
        except asyncio.CancelledError:
            # Past its deadline (the gate cancels): the server is hung, kill and restart it.
            self._go_down("a call to " + tool + f" outlived its {self.config.timeoutMs} ms")
            raise
        except McpError as exc:
            if exc.error.code == types.CONNECTION_CLOSED:
                self._go_down(f"the process ended during a call to {tool}")
                raise self._unavailable(write=write) from exc
            raise ToolFailure(
                "MCP_TOOL_ERROR",
                f"{self.name}/{tool}: {exc.error.message[:500]}",
                details={"server": self.name, "tool": tool, "mcpCode": exc.error.code},
            ) from exc
        except (anyio.ClosedResourceError, anyio.BrokenResourceError) as exc:
            self._go_down(f"the connection closed during a call to {tool}")
            raise self._unavailable(write=write) from exc
        return result_of(self.name, tool, result)

    def _unavailable_message(self) -> str:
        return (
            f"MCP server {self.name!r} is unavailable ({self.reason}); it restarts by "
            f"itself, retry shortly; GET /api/sources/mcp shows its state, {self.log_path} "
            "its stderr"
        )

    def _unavailable(self, *, write: bool) -> ToolFailure:
        """The failure its tools answer while it is down; a write that was under way has an
        unknown outcome and must not be retried."""
        return ToolFailure(
            "MCP_SOURCE_UNAVAILABLE",
            self._unavailable_message(),
            retryable=not write,
            details={
                "server": self.name,
                "state": self.state,
                "remoteState": "unknown" if write else "none",
            },
        )

    def _go_down(self, reason: str) -> None:
        if self.state == "ready":
            self.state, self.reason = "unavailable", reason
            self._session = None
        self._wake.set()

    async def _supervise(self) -> None:
        """Connect, serve until the connection goes down, back off, repeat."""
        while not self._stopping:
            began = time.monotonic()
            try:
                await self._connect_once()
            except asyncio.CancelledError:
                raise
            except _Fatal as fatal:
                self.state, self.reason = "failed", fatal.message
                self._ready.set()
                logger.warning("MCP server %s not started: %s", self.name, fatal.message)
                return
            except Exception as exc:  # any start or transport failure: restart later
                self.state = "unavailable"
                self.reason = f"{type(exc).__name__}: {str(exc)[:200] or 'start failed'}"
                logger.warning("MCP server %s down: %s", self.name, self.reason)
            self._session = None
            self._ready.set()
            if self._stopping:
                return
            if time.monotonic() - began >= HEALTHY_S:
                self._backoff = BACKOFF_FIRST_S
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._backoff):  # a stop ends the wait early
                    await self._wake.wait()
            self._wake.clear()
            self._backoff = min(self._backoff * 2, BACKOFF_MAX_S)
            self.restarts += 1

    async def _connect_once(self) -> None:
        params = await self._params()
        async with AsyncExitStack() as stack:
            errlog = stack.enter_context(self._runtime.open_errlog(self.log_path))
            read, write = await stack.enter_async_context(stdio_client(params, errlog=errlog))
            inbox_in, inbox = anyio.create_memory_object_stream[SessionMessage | Exception](0)
            group = await stack.enter_async_context(anyio.create_task_group())
            # Unwound first: the forwarder ends before its task group is awaited.
            stack.callback(group.cancel_scope.cancel)
            down = asyncio.Event()
            group.start_soon(_forward, read, inbox_in, down)
            session = await stack.enter_async_context(
                ClientSession(inbox, write, message_handler=self._on_message)
            )
            async with asyncio.timeout(self.config.startupTimeoutMs / 1000):
                await session.initialize()
                await self._list(session)
            self._session, self.state, self.reason = session, "ready", "ready"
            self._ready.set()
            await self._serve(session, down)

    async def _serve(self, session: ClientSession, down: asyncio.Event) -> None:
        """Until the process ends or a call hangs: re-list when the server says so."""
        while not down.is_set() and not self._wake.is_set():
            waits = [asyncio.ensure_future(e.wait()) for e in (down, self._wake, self._relist)]
            try:
                await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for waiting in waits:
                    waiting.cancel()
            if self._relist.is_set() and not down.is_set() and not self._wake.is_set():
                self._relist.clear()
                await self._list(session)
        if self.state == "ready":
            self.state, self.reason = "unavailable", "the process ended"
        self._session = None

    async def _list(self, session: ClientSession) -> None:
        tools: list[types.Tool] = []
        cursor: str | None = None
        while len(tools) < MAX_TOOLS:
            page = await session.list_tools(cursor=cursor)
            tools += page.tools
            cursor = page.nextCursor
            if not cursor:
                break
        self._on_tools(self, tools[:MAX_TOOLS])

    async def _on_message(self, message: Any) -> None:
        """The session's message handler: a ``tools/list_changed`` asks for a re-list (done
        by the supervisor, since a request cannot be awaited inside the receive loop)."""
        if isinstance(message, types.ServerNotification) and isinstance(
            message.root, types.ToolListChangedNotification
        ):
            self._relist.set()
        await anyio.lowlevel.checkpoint()

    async def _params(self) -> StdioServerParameters:
        """Its launch through its tier, environment resolved from the credential store."""
        tier = self._runtime.tiers.get(self.config.tier)
        if tier is None:
            raise _Fatal(f"MCP_SOURCE_TIER_UNKNOWN: tier {self.config.tier} is not installed")
        missing = await asyncio.to_thread(tier.available)  # a first probe runs bwrap once
        if missing is not None:
            raise _Fatal(f"MCP_SOURCE_TIER_UNAVAILABLE: tier {self.config.tier}: {missing}")
        spec = LaunchSpec(
            name=self.name,
            command=self.config.command,
            args=tuple(self.config.args),
            env=self._environment(),
            workdir=self.home / "work",
            scratch=self.home / "scratch",
            limits=Limits(**self._limits()),
            egress_hosts=tuple(self.config.egressHosts),
        )
        try:
            launch = tier.launch(spec)
        except RegistryError as exc:
            raise _Fatal(f"{exc.code}: {exc.message}") from exc
        return StdioServerParameters(
            command=launch.command, args=list(launch.args), env=dict(launch.env), cwd=launch.cwd
        )

    def _limits(self) -> dict[str, Any]:
        """The configured limits, ``run_as`` this server's own unless one is given."""
        limits = self.config.limits.model_dump()
        limits["run_as"] = limits["run_as"] or server_run_as(self.name)
        return limits

    def _environment(self) -> dict[str, str]:
        values: dict[str, str] = {}
        for variable, value in self.config.env.items():
            if isinstance(value, CredentialRef):
                secret = self._credentials.get(value.credential)
                if secret is None:
                    raise _Fatal(
                        f"MCP_SOURCE_CREDENTIAL_MISSING: credential {value.credential!r} "
                        f"(for {variable}) is not in the credential store; add it, then "
                        "PUT the server again"
                    )
                values[variable] = secret
            else:
                values[variable] = value
        return values


class _Fatal(Exception):
    """A start that retrying cannot fix (a missing credential or tier)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


async def _forward(
    read: Inbox, inbox: MemoryObjectSendStream[SessionMessage | Exception], down: asyncio.Event
) -> None:
    """Pass the server's messages to the session; the end of its stdout (the process
    ended) sets ``down``, so a dead server is noticed even when no call is waiting."""
    async with inbox:
        try:
            async for message in read:
                await inbox.send(message)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass
        finally:
            down.set()
