"""A registry app with the console mounted, over a real PAOS home, for the console tests."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from fastapi import FastAPI

from doraforge.console import Console, mount
from doraforge.paos.home import PaosHome, open_service
from doraforge.registry.robot_tools import RobotTools
from doraforge.registry.server import build_app, new_service
from doraforge.registry.settings import ServerSettings
from doraforge.skill_runtime.dora_run import dora_environment
from doraforge.skill_runtime.gateway_tokens import GatewayTokens
from doraforge.skill_runtime.runtime import RuntimeManager
from tests.registry.server_support import TOKEN, running

__all__ = ["TOKEN", "console_app", "runtime_of", "serving_console"]


def runtime_of(home: PaosHome) -> RuntimeManager:
    """The home's RuntimeManager with Dora's environment (as ``doraforge`` gives it)."""
    return RuntimeManager(home, environ=dora_environment(os.environ))


def _task_service(home: PaosHome, runtime: RuntimeManager) -> Any:
    from doraforge.skill_runtime.activation import activate_skill

    service = open_service(home, token_for=GatewayTokens(home.runtime_dir))
    service.activate_skill = lambda name: activate_skill(home, name, runtime)
    return service


def console_app(
    home: PaosHome, settings: ServerSettings, runtime: RuntimeManager | None = None
) -> tuple[FastAPI, Any]:
    """The app ``doraforge serve`` builds for ``home``, console mounted; and its service."""
    runtime = runtime or runtime_of(home)
    robot = RobotTools(home, lambda: _task_service(home, runtime), lambda: runtime)
    service = new_service(settings)
    # As `doraforge serve`: a high-risk call without a standing rule waits for an operator.
    service.ask_operators(settings.approval_timeout_s)
    app = build_app(service, settings, robot=robot, api_tools_dir=home.root / "api-tools")
    tokens = GatewayTokens(home.runtime_dir)
    return mount(app, Console(home, robot, lambda: runtime, tokens)), service


@contextmanager
def serving_console(
    home: PaosHome, settings: ServerSettings, runtime: RuntimeManager | None = None
) -> Iterator[str]:
    """The console app on a loopback port; yields the base URL."""
    app, _service = console_app(home, settings, runtime)
    with running(app) as base:
        yield base
