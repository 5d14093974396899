"""Running a recipe: its admission check and its adapter.

A recipe tool holds no authority of its own beyond ``callToolRecipes``. Every call
re-resolves the recipe's active revision, and before each child call (and once for all of
them before the first, so a recipe that cannot finish starts nothing) re-resolves the step
tool by name, compares its fingerprint with the one recorded at save (a difference is
``RECIPE_SCHEMA_DRIFT``) and re-checks the caller's scope, grants and permissions against
it. Each child then runs through ``RegistryService.call`` as the caller's own principal,
so its gates, idempotency and audit apply; its requestId is derived from the recipe
call's. Each invocation is charged at most :data:`MAX_CHILD_CALLS` child calls. A child
that does not complete fails the recipe with the child's own error code.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from doraforge.registry import gates
from doraforge.registry.errors import RegistryError, ToolFailure
from doraforge.registry.model import CallContext, Principal
from doraforge.registry.recipes.definition import (
    Definition,
    InputBinding,
    Step,
    StepBinding,
    binding_of,
)
from doraforge.registry.recipes.validate import fingerprint

if TYPE_CHECKING:
    from doraforge.registry.service import RegistryService

#: Child calls one recipe invocation may make (the spec's per-invocation budget).
MAX_CHILD_CALLS = 5
MAX_REQUEST_ID = 200
#: Recipes are re-saved with ``doraforge recipes save`` (or the console's Recipes page).
RESAVE = "an operator re-saves the recipe (doraforge recipes save, or the console) to accept it"

OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["recipe", "revision", "results"],
    "additionalProperties": False,
    "properties": {
        "recipe": {"type": "string"},
        "revision": {"type": "integer", "minimum": 1},
        "results": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["step", "tool", "result"],
                "properties": {
                    "step": {"type": "integer"},
                    "tool": {"type": "string"},
                    "result": {},
                },
            },
        },
    },
}


@dataclass(frozen=True)
class Active:
    """A recipe's active revision, as a call runs it."""

    revision: int
    definition: Definition
    fingerprints: dict[str, str]


class Budget:
    """The child calls one invocation may still make."""

    def __init__(self, limit: int = MAX_CHILD_CALLS) -> None:
        self.limit, self.used = limit, 0

    def charge(self, tool: str) -> None:
        """Count one child call; :class:`ToolFailure` ``RECIPE_BUDGET_EXCEEDED`` past the
        limit (nothing more runs)."""
        if self.used >= self.limit:
            raise ToolFailure(
                "RECIPE_BUDGET_EXCEEDED",
                f"a recipe call makes at most {self.limit} tool calls; {tool} would exceed it",
                details={"limit": self.limit, "tool": tool},
            )
        self.used += 1


def child_request_id(parent: str, number: int) -> str:
    """The requestId of step ``number`` of the recipe call ``parent``: derived, so a
    replay of the recipe call replays its children, and within the 200-character limit."""
    suffix = f":recipe-step-{number}"
    if len(parent) + len(suffix) <= MAX_REQUEST_ID:
        return parent + suffix
    return hashlib.sha256(parent.encode()).hexdigest() + suffix


class _Absent:
    """A binding to a recipe argument the caller did not give: the argument is left out."""


ABSENT = _Absent()


def _pointer(document: Any, pointer: str, number: int, source: int) -> Any:
    """The value at an RFC 6901 ``pointer`` in step ``source``'s result."""
    value = document
    for raw in pointer.split("/")[1:] if pointer else []:
        token = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(value, dict) and token in value:
            value = value[token]
        elif isinstance(value, list) and token.isdigit() and int(token) < len(value):
            value = value[int(token)]
        else:
            raise ToolFailure(
                "RECIPE_BINDING_UNRESOLVED",
                f"step {number}: step {source}'s result has nothing at {pointer!r}; "
                "the recipe's pointer no longer fits that tool's result",
                details={"step": number, "source": source, "pointer": pointer},
            )
    return value


def resolve(value: Any, inputs: dict[str, Any], results: dict[int, Any], number: int) -> Any:
    """``value`` (step ``number``'s arguments) with every binding replaced by its value."""
    binding = binding_of(value, number) if isinstance(value, dict) else None
    if isinstance(binding, InputBinding):
        return inputs.get(binding.field, ABSENT)
    if isinstance(binding, StepBinding):
        return _pointer(results[binding.step], binding.pointer, number, binding.step)
    if isinstance(value, dict):
        resolved = {k: resolve(v, inputs, results, number) for k, v in value.items()}
        return {k: v for k, v in resolved.items() if v is not ABSENT}
    if isinstance(value, list):
        items = (resolve(item, inputs, results, number) for item in value)
        return [None if item is ABSENT else item for item in items]
    return value


class RecipeRunner:
    """The admission check and adapter of one recipe tool; ``active`` answers its active
    revision now (``None`` once archived)."""

    def __init__(
        self, name: str, active: Callable[[], Active | None], service: RegistryService
    ) -> None:
        self.name, self._active, self._service = name, active, service

    def _current(self) -> Active:
        active = self._active()
        if active is None:
            raise gates.Denied("TOOL_NOT_FOUND", f"{self.name} is archived; restore it first")
        return active

    def admit(self, principal: Principal | None) -> None:
        """Every step can run for ``principal`` (``None``: on the registry's state alone);
        raises ``gates.Denied`` with the first step's reason otherwise."""
        active = self._current()
        for number, step in enumerate(active.definition.steps, start=1):
            self._admit_step(active, number, step, principal)

    def _admit_step(
        self, active: Active, number: int, step: Step, principal: Principal | None
    ) -> None:
        entry = self._service.resolve(step.tool)
        details = {"step": number, "tool": step.tool}
        if entry is None or step.tool not in (entry.listed_name, entry.name):
            raise gates.Denied(
                "RECIPE_TOOL_UNAVAILABLE",
                f"step {number}: {step.tool} is not registered now; start what provides it "
                f"or {RESAVE.replace('accept it', 'change the step')}",
                details=details,
            )
        if fingerprint(entry) != active.fingerprints.get(entry.name):
            raise gates.Denied(
                "RECIPE_SCHEMA_DRIFT",
                f"step {number}: {step.tool} changed since revision {active.revision} was "
                f"saved; {RESAVE}",
                details=details,
            )
        if principal is not None:
            gates.capabilities(entry, principal, require_auth_for_writes=False)
            gates.permissions(entry, principal)

    async def run(self, arguments: dict[str, Any], context: CallContext) -> dict[str, Any]:
        """The adapter: the steps in order, each a governed child call as the caller."""
        try:
            active = self._current()
            self.admit(context.principal)
        except gates.Denied as denied:
            raise _failure(denied) from None
        budget = Budget()
        results: dict[int, Any] = {}
        for number, step in enumerate(active.definition.steps, start=1):
            try:
                self._admit_step(active, number, step, context.principal)
            except gates.Denied as denied:
                raise _failure(denied) from None
            child_arguments = resolve(step.arguments, arguments, results, number)
            budget.charge(step.tool)
            results[number] = await self._child(step, number, child_arguments, context)
        returned = [
            {"step": k, "tool": active.definition.steps[k - 1].tool, "result": results[k]}
            for k in active.definition.returned_steps()
        ]
        return {"recipe": self.name, "revision": active.revision, "results": returned}

    async def _child(
        self, step: Step, number: int, arguments: dict[str, Any], context: CallContext
    ) -> Any:
        request_id = child_request_id(context.request_id, number)
        body = {
            "type": "portos_tool_call",
            "requestId": request_id,
            "name": step.tool,
            "arguments": arguments,
        }
        details = {"step": number, "tool": step.tool, "requestId": request_id}
        try:
            result = await self._service.call(body, context.principal)
        except RegistryError as exc:
            message = f"step {number} ({step.tool}) was refused: {exc.message}"
            raise ToolFailure(exc.code, message, retryable=exc.retryable, details=details) from None
        if result["state"] == "completed":
            return result.get("result")
        error = result.get("error") or {}
        raise ToolFailure(
            str(error.get("code") or "RECIPE_STEP_FAILED"),
            f"step {number} ({step.tool}) {result['state']}: {error.get('message')}",
            retryable=bool(error.get("retryable")),
            details={**details, "state": result["state"]},
        )


def _failure(denied: gates.Denied) -> ToolFailure:
    """A refusal found while the recipe runs, as the recipe's failure (same code)."""
    return ToolFailure(denied.code, denied.message, details=denied.details)
