"""The console's page table: every page the shell routes to, as agents navigate to it.

One row per page module of ``static/js/pages`` (the shell's ``PAGES`` in ``app.js``
maps the route name to the module, ``index.html``'s nav shows the label): the route
``/console/#/<name>``, the label, the words an operator might use for it, and the
sections the page shows. ``tests/console/test_navigation.py`` checks this table against
the shipped files, so a page added there and not here fails the build.

:func:`entries` hands the table to the registry's ``navigation`` context scope as plain
data (the registry cannot import the console).
"""

from __future__ import annotations

from dataclasses import dataclass

from doraforge.console.shell import PREFIX
from doraforge.registry.context.scopes import NavigationEntry


@dataclass(frozen=True)
class ConsolePage:
    """One console page: ``name`` is its route (``#/name``), ``module`` its file in
    ``static/js/pages``."""

    name: str
    module: str
    label: str
    description: str
    aliases: tuple[str, ...]
    sections: tuple[str, ...] = ()

    @property
    def route(self) -> str:
        return f"{PREFIX}/#/{self.name}"


PAGES: tuple[ConsolePage, ...] = (
    ConsolePage(
        "cell",
        "cell.js",
        "Cell",
        "The running skill's cameras, joint state, each tool's readiness and busy state, "
        "and the invocations in flight.",
        ("camera", "cameras", "live view", "joint state", "robot state", "invocations"),
        ("Joint state", "Tools", "Invocations"),
    ),
    ConsolePage(
        "skills",
        "skills.js",
        "Skills",
        "Installed skills, their versions and runtime state with its reason; start and "
        "stop a skill, read its recent logs.",
        ("installed skills", "runtime", "start skill", "stop skill", "skill logs"),
        ("Logs",),
    ),
    ConsolePage(
        "tools",
        "tools.js",
        "Tools",
        "The running skill's tool catalog with live context; run a Query, an Action or a "
        "Session from a form generated from its input schema, and cancel or stop it.",
        ("tool catalog", "run a tool", "query", "action", "session", "tool context"),
    ),
    ConsolePage(
        "tasks",
        "tasks.js",
        "Tasks",
        "The recent AgentTasks and one task's story: its verdict per criterion, revisions, "
        "a timeline of tool records and captures, and its evidence frames and bundle.",
        ("agent tasks", "task history", "verdict", "verdicts", "evidence", "evidence bundle"),
        ("Verdict", "Evidence", "Revisions", "Timeline"),
    ),
    ConsolePage(
        "approvals",
        "approvals.js",
        "Approvals",
        "High-risk calls waiting for an operator: approve or deny each one with a reason; "
        "a call nobody decides before it expires is denied.",
        ("pending approvals", "approve", "deny", "high-risk calls", "operator decisions"),
        ("Waiting", "Decided"),
    ),
    ConsolePage(
        "api-tools",
        "api_tools.js",
        "API tools",
        "The declarative HTTP API services: authentication by credential name, each tool's "
        "method, path and parameters, and a probe form.",
        ("api services", "http tools", "declarative api tools", "probe"),
        ("Authentication", "Tools", "Probe"),
    ),
    ConsolePage(
        "recipes",
        "recipes.js",
        "Recipes",
        "The saved read recipes agents call as recipe.* tools: their status and "
        "availability, a definition and its revisions; save, archive and restore.",
        ("saved recipes", "read recipes", "recipe library", "recipe revisions"),
        ("Save a definition", "Active definition", "Revisions"),
    ),
    ConsolePage(
        "audit",
        "audit.js",
        "Audit",
        "The registry's recent call outcomes and approval events, newest first (argument "
        "keys only, never values or results).",
        ("audit log", "call log", "call history", "outcomes"),
    ),
)


def entries() -> tuple[NavigationEntry, ...]:
    """The page table as the registry's navigation entries."""
    return tuple(
        NavigationEntry(
            kind="page",
            label=page.label,
            route=page.route,
            description=page.description,
            aliases=page.aliases,
            sections=page.sections,
        )
        for page in PAGES
    )
