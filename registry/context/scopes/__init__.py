"""doraforge's context scopes: one :class:`~..source.ContextSource` per module.

- :mod:`.navigation`: the console's pages and the CLI's commands (passed in as plain
  :class:`~.navigation.NavigationEntry` data: the registry cannot import either).
- :mod:`.skills`: the installed skills of the PAOS home.
- :mod:`.tools`: the ToolSpecs and live readiness of the running skills' Gateways.
- :mod:`.tasks`: AgentTask summaries, verdicts and criteria from the task store.
- :mod:`.evidence`: the evidence index (never the bytes, never the path).
- :mod:`.runtime`: each recorded runtime's state and Gateway identity.

Every source snapshots at most ``limit`` source items, reads blocking state in a worker
thread, and refers to things only by :func:`~..source.opaque_ref`.
"""

from doraforge.registry.context.scopes.evidence import EvidenceSource
from doraforge.registry.context.scopes.navigation import NavigationEntry, NavigationSource
from doraforge.registry.context.scopes.runtime import RuntimeSource
from doraforge.registry.context.scopes.skills import SkillsSource
from doraforge.registry.context.scopes.tasks import TasksSource
from doraforge.registry.context.scopes.tools import ToolsSource

__all__ = [
    "EvidenceSource",
    "NavigationEntry",
    "NavigationSource",
    "RuntimeSource",
    "SkillsSource",
    "TasksSource",
    "ToolsSource",
]
