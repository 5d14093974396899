"""The agent-context contract eval: a declarative fixture suite run as a black box.

A fixture (YAML, schema :class:`Fixture`) names sanitized fake source sets and cases. Each
case builds a *fresh* contract from fake sources only — never the operator's home or a
running robot — either in process (:class:`~.service.ContextService`) or through the real
MCP endpoint of a registry app built in memory (``via: mcp``), makes one request (a context
tool call, ``tools/list`` or the agent manifest) and checks declarative expectations
against the answer: JSON pointers (``*`` selects every member) with ``equals``,
``contains``, ``notContains``, ``maxChars``, ``maxTokens`` and the other matchers of
:class:`Expectation`. :func:`run_suite` returns one report: summary counts and, per case,
its outcome (``pass | fail | error | skip``), fixture source (``file:line``), tool and
pointers, and a one-line reason when it did not pass.

``fail`` is the contract answering otherwise than the fixture says (a protocol fault or an
HTTP status other than 200 included, unless the case expects that fault); ``error`` is a
case that could not be judged: the contract raised something no caller could catch, or
did not answer within :data:`~.runner.CASE_TIMEOUT_S`. A fixture that cannot be read or
does not fit the schema raises :class:`FixtureError` before any case runs.
"""

from doraforge.registry.context.eval.loading import (
    SHIPPED_FIXTURE,
    FixtureError,
    LoadedFixture,
    load_fixture,
)
from doraforge.registry.context.eval.runner import CaseResult, report, run_case, run_suite
from doraforge.registry.context.eval.schema import Fixture

__all__ = [
    "SHIPPED_FIXTURE",
    "CaseResult",
    "Fixture",
    "FixtureError",
    "LoadedFixture",
    "load_fixture",
    "report",
    "run_case",
    "run_suite",
]
