"""The context sources ``doraforge serve`` offers agents: one per scope, over the PAOS
home, the runtime, the console's pages and this CLI's commands.

The navigation table is the console's page table and this very parser's commands,
handed to the registry as plain data (it cannot import either). The tools scope reaches
running skills' Gateways exactly as the registry's robot tools do: ``robot``'s
``SkillGateways`` and its TaskService's shared clients, which present each runtime's own
token and are closed with the server.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from doraforge.cli.context import Context
    from doraforge.registry.context.scopes.navigation import NavigationEntry
    from doraforge.registry.context.scopes.tools import ToolApi
    from doraforge.registry.context.source import ContextSource, Scope
    from doraforge.registry.robot_tools import RobotTools


def navigation_entries() -> tuple[NavigationEntry, ...]:
    """The console's pages, then the CLI's commands."""
    from doraforge.cli.navigation import entries as commands
    from doraforge.console.navigation import entries as pages

    return pages() + commands()


def _robot(ctx: Context) -> RobotTools:
    """Robot tools as ``doraforge serve`` builds them: only running skills' own tokens."""
    from doraforge.registry.robot_tools import RobotTools

    tokens = ctx.gateway_tokens(operator=False)
    return RobotTools(ctx.home, lambda: ctx.service(tokens), ctx.runtime)


def build(ctx: Context, robot: RobotTools | None = None) -> dict[Scope, ContextSource]:
    """Every scope's source for the server ``ctx`` serves; ``robot`` is the server's own
    robot tools (whose TaskService the server closes), else a set built like it."""
    from doraforge.registry.context.scopes import (
        EvidenceSource,
        NavigationSource,
        RuntimeSource,
        SkillsSource,
        TasksSource,
        ToolsSource,
    )

    robot = robot or _robot(ctx)

    def client(url: str) -> ToolApi:
        tool_api: ToolApi = robot.task_service().client(url)
        return tool_api

    return {
        "navigation": NavigationSource(navigation_entries()),
        "skills": SkillsSource(ctx.home),
        "tools": ToolsSource(ctx.home, robot.gateways.url, client),
        "tasks": TasksSource(ctx.home),
        "evidence": EvidenceSource(ctx.home),
        "runtime": RuntimeSource(ctx.home, ctx.runtime),
    }
