"""PhyAgentOS's agent-tool argument shapes, mapped to doraforge's in this one place.

PhyAgentOS 1.1.1 (``PhyAgentOS.agent.tools``) and doraforge expose the same ``forge_*``
agent tools; an agent written for PhyAgentOS calls them with its own shapes, and this
module is where those become doraforge's:

- ``activate_skill {name, role?}`` answers an ``activation_id`` (``activation_<hex>``)
  bound to the running skill's activation (:class:`ActivationBook`, one per TaskService,
  in memory: like PhyAgentOS's, an activation lives as long as the agent's process), with
  the skill document and the lessons of that skill version, as PhyAgentOS answers them
  (:mod:`paos.phyagentos_answers`);
- ``forge_task_create {task_description, activation_id, verification}`` takes
  PhyAgentOS's ``TaskVerificationContract`` (``success_criteria`` a list of strings),
  turned into doraforge's machine-checkable contract by :func:`contract_from_phyagentos`;
- status/result/cancel/stop take ``invocation_id`` besides doraforge's ``record_id``
  (:func:`record_of_invocation`).
"""

from __future__ import annotations

import uuid
import weakref
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from doraforge.paos.errors import PaosError
from doraforge.paos.phyagentos_answers import document_sha256
from doraforge.paos.verify.errors import InvalidContract

type Role = Literal["primary", "supporting"]

#: How many activations one TaskService remembers (the oldest are forgotten first).
MAX_ACTIVATIONS = 256
_GOAL_MAX = 2000


def skill_document(skill: Any) -> str | None:
    """The skill document (``SKILL.md`` text) a SkillActivation carries, if it carries one.

    The Skill Runtime's activation states it as ``document``; an activation built without
    one (an older runtime, a test double) has none, and the answer then says so
    (``skill_document_available: false``) instead of inventing a text.
    """
    document = getattr(skill, "document", None)
    return document if isinstance(document, str) else None


@dataclass(frozen=True)
class Activation:
    """One ``activate_skill`` result: its id, role, time and doraforge's SkillActivation
    (binding candidate, the skill's verification contract template, its document)."""

    activation_id: str
    role: Role
    activated_at: str
    skill: Any

    def public(self) -> dict[str, Any]:
        """PhyAgentOS's ``SkillActivation`` (``skill_activation_v2``) fields, plus what
        doraforge would bind to (``profile``, ``required_tools``, ``runtime_instance``).

        ``content_sha256`` is the SHA-256 of the document served, as PhyAgentOS hashes it;
        without a document, the installed ``SKILL.md``'s hash the binding freezes.
        """
        candidate = self.skill.candidate
        document = skill_document(self.skill)
        return {
            "version": "skill_activation_v2",
            "activation_id": self.activation_id,
            "skill_name": candidate.skill,
            "role": self.role,
            "source": "installed",
            "content_sha256": (
                document_sha256(document) if document is not None else candidate.skill_md_sha256
            ),
            "skill_version": candidate.version,
            "binding_candidate_id": None,
            "activated_at": self.activated_at,
            "profile": candidate.profile,
            "required_tools": list(candidate.required_tools),
            "runtime_instance": candidate.runtime_instance,
        }


class ActivationBook:
    """The activations of one TaskService, by id, bounded to :data:`MAX_ACTIVATIONS`."""

    def __init__(self) -> None:
        self._by_id: OrderedDict[str, Activation] = OrderedDict()

    def add(self, skill: Any, role: Role) -> Activation:
        """Remember ``skill`` (a SkillActivation) under a new ``activation_<hex>`` id."""
        stamp = datetime.now(UTC).isoformat().replace("+00:00", "Z")
        activation = Activation(f"activation_{uuid.uuid4().hex}", role, stamp, skill)
        self._by_id[activation.activation_id] = activation
        while len(self._by_id) > MAX_ACTIVATIONS:
            self._by_id.popitem(last=False)
        return activation

    def latest(self) -> Activation | None:
        """The most recent primary activation, if any."""
        primaries = [a for a in self._by_id.values() if a.role == "primary"]
        return primaries[-1] if primaries else None

    def primary(self, activation_id: str) -> Activation:
        """The primary activation ``activation_id``; raises ``PAOS_UNKNOWN_ACTIVATION``
        (unknown or forgotten) or ``PAOS_ACTIVATION_NOT_PRIMARY``."""
        activation = self._by_id.get(activation_id)
        if activation is None:
            raise PaosError(
                "PAOS_UNKNOWN_ACTIVATION",
                f"no activation {activation_id}: call activate_skill first",
                details={"activation_id": activation_id},
            )
        if activation.role != "primary":
            raise PaosError(
                "PAOS_ACTIVATION_NOT_PRIMARY",
                "a task binds to a primary activation, not a supporting one",
                details={"activation_id": activation_id},
            )
        return activation


_BOOKS: weakref.WeakKeyDictionary[Any, ActivationBook] = weakref.WeakKeyDictionary()


def activations(service: Any) -> ActivationBook:
    """The ActivationBook of ``service`` (created on first use, gone with the service)."""
    book = _BOOKS.get(service)
    if book is None:
        book = _BOOKS[service] = ActivationBook()
    return book


def contract_from_phyagentos(
    verification: Mapping[str, Any] | None,
    task_description: str,
    template: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """doraforge's verification contract for PhyAgentOS's ``TaskVerificationContract``.

    - ``mode`` is kept (PhyAgentOS's default ``off``); ``goal`` is kept, or the
      ``task_description``.
    - ``success_criteria`` are strings. One naming the ``id`` of a criterion of the skill's
      own contract (``template``) selects that machine criterion; when none names one, all
      the template's criteria apply. Strings that name none, and ``constraints``, cannot be
      machine-checked: they are recorded verbatim in the goal text, never dropped silently.
    - ``evidence_policy.required_sources`` is kept (else the template's); its ``profile``,
      ``required_kinds`` and ``minimum_association`` have no doraforge counterpart and are
      ignored. ``max_age_s``, ``replan_budget`` and ``deadline_s`` come from the template.

    The result is validated later by ``parse_contract`` (``enforce`` without any machine
    criterion is refused there, with a message naming ``success_criteria``).
    """
    given = dict(verification or {})
    base = dict(template or {})
    by_id = {c.get("id"): c for c in base.get("success_criteria", []) if isinstance(c, dict)}
    stated = [str(s).strip() for s in given.get("success_criteria", [])]
    named = [by_id[s] for s in stated if s in by_id]
    prose = [s for s in stated if s not in by_id]
    policy = dict(base.get("evidence_policy", {}))
    sources = (given.get("evidence_policy") or {}).get("required_sources")
    if sources is not None:
        policy["required_sources"] = list(sources)
    contract: dict[str, Any] = {
        "mode": given.get("mode", "off"),
        "goal": _goal(given, task_description, prose, given.get("constraints", [])),
        "success_criteria": named or list(by_id.values()),
        "evidence_policy": policy,
    }
    for name in ("replan_budget", "deadline_s"):
        if name in base:
            contract[name] = base[name]
    return contract


def _goal(given: Mapping[str, Any], description: str, prose: list[str], rules: list[Any]) -> str:
    goal = str(given.get("goal") or "").strip() or description.strip()
    if prose:
        goal += "\nStated success criteria (not machine-checked): " + "; ".join(prose)
    if rules:
        goal += "\nConstraints: " + "; ".join(str(r).strip() for r in rules)
    if len(goal) > _GOAL_MAX:
        raise InvalidContract(
            f"verification: goal, criteria and constraints exceed {_GOAL_MAX} characters"
        )
    return goal


def record_of_invocation(service: Any, task_id: str, invocation_id: str, semantics: str) -> str:
    """The ``record_id`` of this task's ``semantics`` record for ``invocation_id``.

    Raises ``PAOS_UNKNOWN_INVOCATION`` for an id the task did not start (another task's
    included): nothing about it is read from the Gateway.
    """
    for record in service.store.records(task_id):
        if record.invocation_id == invocation_id and record.semantics == semantics:
            return str(record.record_id)
    raise PaosError(
        "PAOS_UNKNOWN_INVOCATION",
        f"task {task_id} has no {semantics} invocation {invocation_id}",
        details={"task_id": task_id, "invocation_id": invocation_id},
    )
