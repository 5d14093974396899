"""``doraforge serve``: the semantic tool registry (HTTP catalog and calls, MCP endpoint);
while it listens, ``serve.json`` in the home says where (:mod:`cli.serve_state`)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from doraforge.cli import serve_state
from doraforge.cli.context import Context
from doraforge.registry.context.source import SCOPES


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    serve = commands.add_parser("serve", help="serve the tool registry and the MCP endpoint")
    serve.add_argument("--host", default=None, help="listen address (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=None, help="listen port (default 8765)")
    serve.add_argument(
        "--grant", action="append", default=[], metavar="NAME", help="grant a capability"
    )
    serve.add_argument(
        "--approve",
        action="append",
        default=[],
        metavar="TOOL",
        help="a standing approval of a high-risk tool, by the name tools/list shows "
        "(forge_tool_start_action; for unattended runs)",
    )
    serve.add_argument(
        "--approval-timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help="how long any other high-risk call waits for an operator's decision "
        "(`doraforge approvals`; default 120, 0 denies at once)",
    )
    serve.add_argument(
        "--home", type=Path, default=argparse.SUPPRESS, help="PAOS home (as the global option)"
    )
    serve.add_argument(
        "--mcp", action="store_true", help="enable the MCP endpoint /mcp (off by default)"
    )
    serve.add_argument(
        "--context-profile",
        choices=("metadata", "summaries"),
        default=None,
        help="what the context tools disclose: metadata (default: labels, counts, routes, "
        "opaque refs) or summaries (adds redacted summaries)",
    )
    serve.add_argument(
        "--context-scope",
        action="append",
        default=[],
        choices=SCOPES,
        metavar="SCOPE",
        help="a context scope agents may read (repeatable; replaces the default navigation, "
        f"skills, tools, runtime); one of {', '.join(SCOPES)}",
    )
    serve.add_argument(
        "--task-slots",
        choices=("global", "per_runtime"),
        default=None,
        help="set the home's task slots: global (one active AgentTask in the home, a new "
        "home's default) or per_runtime (one per running skill, for a fleet of cells); "
        "config key task_slots; unset keeps the home's",
    )
    serve.add_argument(
        "--task-idle-timeout",
        type=float,
        default=None,
        metavar="SECONDS",
        help="an agent's task with no call for this long is cancelled (idle_timeout) at the "
        "next start or task_create; config key task_idle_timeout_s (default 600)",
    )
    serve.add_argument("--config", type=Path, default=None, help="a YAML or JSON config file")
    serve.add_argument(
        "--token-env", default=None, metavar="VAR", help="environment variable with the token"
    )
    serve.add_argument(
        "--token-file", type=Path, default=None, metavar="PATH", help="file (0600) with the token"
    )
    serve.add_argument(
        "--operator-token-env",
        default=None,
        metavar="VAR",
        help="environment variable with the operator's own token: then only it decides "
        "approvals and opens the console (the agent token there is refused)",
    )
    serve.add_argument(
        "--operator-token-file",
        type=Path,
        default=None,
        metavar="PATH",
        help="file (0600) with the operator's own token",
    )
    serve.add_argument(
        "--insecure",
        action="store_true",
        help="allow a non-loopback bind without a token (lab networks only; logged loudly)",
    )
    serve.set_defaults(handler=_serve)


def _serve(ctx: Context, args: argparse.Namespace) -> int:
    from doraforge.console import Console, mount
    from doraforge.paos.owners import OwnerLocks
    from doraforge.registry.robot_tools import RobotTools
    from doraforge.registry.server import build_app, new_service, serve
    from doraforge.registry.settings import load_settings
    from doraforge.registry.task_owner import TaskOwnership

    settings = load_settings(
        config=args.config,
        environ=os.environ,
        host=args.host,
        port=args.port,
        grants=args.grant,
        approvals=args.approve,
        approval_timeout_s=args.approval_timeout,
        mcp=args.mcp,
        token_env=args.token_env,
        token_file=args.token_file,
        operator_token_env=args.operator_token_env,
        operator_token_file=args.operator_token_file,
        insecure=args.insecure,
        context_profile=args.context_profile,
        context_scopes=args.context_scope,
        task_slots=args.task_slots,
        task_idle_timeout_s=args.task_idle_timeout,
    )
    if settings.task_slots is not None:
        _set_task_slots(ctx, settings.task_slots)
    # The registry reaches only running skills' Gateways: their runtime tokens, never the
    # operator's ad-hoc one.
    tokens = ctx.gateway_tokens(operator=False)
    service = new_service(settings)
    # The tasks agents open here are this server's: ended with it, or when left idle.
    ownership = TaskOwnership(
        OwnerLocks(ctx.home.root / "owners"), settings.task_idle_timeout_s, service.audit
    )
    robot = RobotTools(ctx.home, lambda: ctx.service(tokens), ctx.runtime, ownership)
    # Operators can answer this server (`doraforge approvals`, the console): a high-risk
    # call without a standing --approve rule waits for their decision, bounded.
    service.ask_operators(settings.approval_timeout_s)
    from doraforge.cli.context_sources import build as context_sources

    app = build_app(
        service,
        settings,
        robot=robot,
        api_tools_dir=ctx.home.root / "api-tools",
        recipes_dir=ctx.home.root / "recipes",
        sources_dir=ctx.home.root / "sources",
        context_sources=context_sources(ctx, robot),
    )
    # The operator's console on the same server, under the same guard and token.
    mount(app, Console(ctx.home, robot, ctx.runtime, tokens))
    # serve.json tells `doraforge approvals` (and the other registry commands) of this
    # home where to dial, for as long as this process serves.
    try:
        serve(app, settings, say=ctx.out.say, listening=lambda host, port: _record(ctx, host, port))
    except KeyboardInterrupt:
        # uvicorn stops in order on SIGINT and SIGTERM alike, then raises the signal again:
        # SIGTERM arrives here (the CLI's handler), SIGINT does not; both are a normal end.
        pass
    finally:
        serve_state.remove(ctx.home)
    ctx.out.say("registry stopped")
    return 0


def _record(ctx: Context, host: str, port: int) -> None:
    serve_state.write(ctx.home, serve_state.dial_url(host, port))


def _set_task_slots(ctx: Context, mode: str) -> None:
    """Set the home's task slots before serving; ``PAOS_TASK_SLOTS_BUSY`` (one line, from
    the CLI's error edge) when global is asked while several tasks are active."""
    from doraforge.paos.store import AgentTaskStore

    store = AgentTaskStore(ctx.home.store_path)
    try:
        if store.task_slots() != mode:
            store.set_task_slots(mode)  # type: ignore[arg-type]  # choices are TaskSlots
            ctx.out.say(f"task slots of {ctx.home.root}: {mode}")
    finally:
        store.close()
