"""Shared pieces of the recipe tests: a service holding the demo tools, a library over a
temporary directory, the agent principal and a few definitions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from doraforge.registry.model import Principal
from doraforge.registry.recipes.library import GRANT, RecipeLibrary
from doraforge.registry.service import RegistryService
from tests.registry.server_support import DemoTools

READ = "robot.read"
GRANTS = frozenset({READ, GRANT})


def agent(grants: frozenset[str] = GRANTS) -> Principal:
    """The agent principal as the MCP endpoint derives it, with ``grants``."""
    return Principal(id="doraforge-agent", scope="agent", grants=grants)


def read_tool(name: str, grant: str, scopes: list[str], description: str) -> dict[str, Any]:
    """A low-risk read tool entry without arguments."""
    return {
        "name": name,
        "providerName": name.replace(".", "_"),
        "description": description,
        "input_schema": {"type": "object", "additionalProperties": False, "properties": {}},
        "output_schema": {"type": "object"},
        "policy": {
            "scopes": scopes,
            "requiredCapabilities": [grant],
            "sideEffect": "read",
            "idempotent": True,
            "risk": "low",
        },
    }


def ui_only_tool() -> dict[str, Any]:
    """A read tool offered to the ui scope only (never to agents)."""
    return read_tool("demo.panel", READ, ["ui"], "A read the operator's ui may make, agents not.")


async def _panel(_arguments: dict[str, Any]) -> dict[str, Any]:
    return {"panel": "ok"}


def demo_service(tools: DemoTools | None = None) -> RegistryService:
    """A service with the demo tools (echo, big, write, fail), the ui-only panel and the
    clock."""
    service = RegistryService()
    (tools or DemoTools()).register(service)
    service.register(ui_only_tool(), _panel)
    service.register(clock_tool(), clock)
    return service


def open_library(service: RegistryService, directory: Path) -> RecipeLibrary:
    return RecipeLibrary(directory, service)


def echo_twice(slug: str = "echo-twice", **changes: Any) -> dict[str, Any]:
    """Echo the recipe's ``text``, then echo what the first echo answered."""
    definition: dict[str, Any] = {
        "name": f"recipe.{slug}",
        "description": "Echo a text, then echo the first answer again.",
        "input_schema": {
            "type": "object",
            "additionalProperties": False,
            "required": ["text"],
            "properties": {"text": {"type": "string", "maxLength": 50}},
        },
        "steps": [
            {"tool": "demo.echo", "arguments": {"text": {"$input": "text"}}},
            {"tool": "demo.echo", "arguments": {"text": {"$step": 1, "pointer": "/text"}}},
        ],
        "output": [1, 2],
    }
    return {**definition, **changes}


def big_count(slug: str = "big-count") -> dict[str, Any]:
    """A literal-argument recipe over demo.big."""
    return {
        "name": f"recipe.{slug}",
        "description": "Count to three with the big demo tool.",
        "input_schema": {"type": "object", "additionalProperties": False, "properties": {}},
        "steps": [{"tool": "demo.big", "arguments": {"count": 3}}],
    }


def child_names(service: RegistryService) -> list[str]:
    """The tools the audit trail says ran or were refused, in order, recipes excluded."""
    return [
        str(record["name"])
        for record in service.audit.records()
        if record.get("kind") != "approval" and not str(record["name"]).startswith("recipe.")
    ]


CLOCK = "clock.read"


def clock_tool() -> dict[str, Any]:
    """A read tool behind a grant of its own (``clock.read``), for recipes that keep
    working when ``robot.read`` is revoked."""
    return read_tool("demo.clock", CLOCK, ["agent", "ui"], "The demo clock.")


async def clock(_arguments: dict[str, Any]) -> dict[str, Any]:
    return {"now": 1234}


def clock_recipe() -> dict[str, Any]:
    return {
        "name": "recipe.clock",
        "description": "Read the clock.",
        "input_schema": {"type": "object", "additionalProperties": False, "properties": {}},
        "steps": [{"tool": "demo.clock", "arguments": {}}],
    }


def console_with_recipes(home: Any, settings: Any, directory: Path) -> tuple[Any, RegistryService]:
    """What ``doraforge serve`` builds, with the demo tools and a recipe library in
    ``directory``: the registry app, the console mounted on it; and its service."""
    from doraforge.console import Console, mount
    from doraforge.registry.robot_tools import RobotTools
    from doraforge.registry.server import build_app, new_service
    from doraforge.skill_runtime.gateway_tokens import GatewayTokens
    from tests.console.support import runtime_of

    runtime = runtime_of(home)
    robot = RobotTools(home, lambda: None, lambda: runtime)
    service = new_service(settings)
    DemoTools().register(service)
    app = build_app(service, settings, recipes_dir=directory)
    tokens = GatewayTokens(home.runtime_dir)
    return mount(app, Console(home, robot, lambda: runtime, tokens)), service
