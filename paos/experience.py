"""Experience: a terminal AgentTask as one redacted episode, and lessons per skill version.

An episode keeps only what can be learned without leaking: the skill name and version,
revision verdicts, per-record tool id, semantics, status and error code, SHA-256
fingerprints of the invocation and attempt ids, and evidence by content hash. It never
holds raw outputs, arguments, messages, credentials, URLs or endpoints, or numbers taken
from arguments or outputs: every kept string must be a short identifier token, and URL-like
strings are stripped.

Everything here is fail-open: odd input is logged and skipped, nothing raises to the
caller, and nothing touches task state, Gateway facts or verification attempts.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial
from typing import Any, Literal, Protocol, TypedDict

log = logging.getLogger(__name__)

EPISODE_SCHEMA = "doraforge.paos.episode/v1"
FAILED_RECORD_STATES = frozenset({"failed", "unknown"})
UNVERIFIED = frozenset({"fail", "inconclusive"})

# Identifiers only: a leading letter keeps bare numbers out; no "/" or ":" keeps paths,
# hosts and ports out.
_TOKEN = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]{0,127}$")
_VERSION = re.compile(r"^[0-9A-Za-z][0-9A-Za-z.+_-]{0,63}$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_URL = re.compile(r"https?://\S*", re.IGNORECASE)
_HINTS = {
    "unknown": "the physical outcome was uncertain: reconcile and observe before acting again",
    "timeout": "the remote state was unknown: reconcile, never re-send the same Action blindly",
}


# -- the episode and lesson documents -------------------------------------------------------
# Every string is a token, a version, a fingerprint or a SHA-256, or None where the source
# had nothing safe to keep; episodes are stored as these JSON documents.


class EpisodeCriterion(TypedDict):
    """One verification criterion's outcome in a revision."""

    criterion_id: str | None
    status: str | None


class EpisodeRevision(TypedDict):
    """One planning generation: its fingerprint, ordinal and verdict."""

    revision: str | None
    ordinal: int | None
    verdict: str | None
    criteria: list[EpisodeCriterion]


class EpisodeRecord(TypedDict):
    """One tool execution record, reduced to what it was and how it ended."""

    revision_ordinal: int | None
    tool_id: str | None
    semantics: str | None
    ownership: str | None
    status: str | None
    error_code: str | None
    invocation: str | None
    attempt: str | None


class EpisodeArtifact(TypedDict):
    """One evidence artifact by content hash."""

    revision_ordinal: int | None
    source: str | None
    phase: str | None
    sha256: str | None
    capture_error: str | None


class Episode(TypedDict):
    """The redacted episode of one terminal AgentTask (schema :data:`EPISODE_SCHEMA`)."""

    schema: str
    skill: str | None
    version: str | None
    binding: str | None
    task: str | None
    outcome: str | None
    mode: str | None
    replans_used: int | None
    revisions: list[EpisodeRevision]
    records: list[EpisodeRecord]
    evidence: list[EpisodeArtifact]


class ToolLesson(TypedDict):
    """A cluster of tool failures: one tool ending with one error code."""

    skill: str
    version: str
    kind: Literal["tool_failure"]
    key: str
    tool_id: str
    error_code: str
    count: int
    episodes: int
    of_episodes: int
    advice: str


class CheckLesson(TypedDict):
    """A cluster of unverified outcomes: one criterion ending with one status."""

    skill: str
    version: str
    kind: Literal["verification"]
    key: str
    criterion_id: str
    status: str
    count: int
    episodes: int
    of_episodes: int
    advice: str


type Lesson = ToolLesson | CheckLesson


class ExperienceLog(Protocol):
    """Where episodes are kept; the AgentTask store implements it."""

    def add_episode(self, task_id: str, skill: str, version: str, episode: Episode) -> None:
        """Keep one episode per terminal task (a second one for the same task is ignored)."""
        ...

    def episodes(self, skill: str, version: str) -> Sequence[Mapping[str, Any]]:
        """The stored episodes of one skill version, oldest first (read defensively)."""
        ...


class InMemoryExperienceLog:
    """An :class:`ExperienceLog` in memory, for tests and one-shot tools."""

    def __init__(self) -> None:
        self._episodes: dict[str, tuple[str, str, Episode]] = {}

    def add_episode(self, task_id: str, skill: str, version: str, episode: Episode) -> None:
        """Keep ``episode`` unless ``task_id`` already has one."""
        self._episodes.setdefault(task_id, (skill, version, episode))

    def episodes(self, skill: str, version: str) -> list[Episode]:
        """Episodes of ``skill`` at ``version`` in insertion order."""
        return [e for s, v, e in self._episodes.values() if (s, v) == (skill, version)]


def fingerprint(value: Any) -> str | None:
    """``sha256:<hex>`` of an identifier, or ``None`` when there is none."""
    if not isinstance(value, str) or not value:
        return None
    return "sha256:" + hashlib.sha256(value.encode()).hexdigest()


def token(value: Any) -> str | None:
    """``value`` when it is a short identifier (tool id, state, error code), else ``None``."""
    if isinstance(value, str) and _TOKEN.match(value) and not _URL.search(value):
        return value
    return None


def episode_from(
    task: Mapping[str, Any],
    revisions: Sequence[Mapping[str, Any]],
    records: Sequence[Mapping[str, Any]],
    verdicts: Sequence[Mapping[str, Any]],
    evidence: Sequence[Mapping[str, Any]],
    binding: Mapping[str, Any],
) -> Episode:
    """One redacted episode of a terminal task, scoped to the bound skill name and version.

    ``verdicts`` fill in revisions that carry no ``verdict`` of their own (matched by
    ``revision_id``, else by position). Malformed entries are skipped, never raised on.
    """
    ordinals = _ordinals(revisions)
    episode: Episode = {
        "schema": EPISODE_SCHEMA,
        "skill": token(_get(binding, "skill", "skill_name")),
        "version": _version(_get(binding, "version", "skill_version")),
        "binding": fingerprint(_get(binding, "binding_id") or _get(task, "binding_id")),
        "task": fingerprint(_get(task, "task_id")),
        "outcome": token(_get(task, "state")),
        "mode": token(_get(_mapping(_get(task, "contract")), "mode")),
        "replans_used": _count(_get(task, "replans_used")),
        "revisions": _each(
            partial(_revision, verdicts=_verdicts_by(verdicts)),
            enumerate(_safe_list(revisions)),
        ),
        "records": _each(partial(_record, ordinals=ordinals), records),
        "evidence": _each(partial(_artifact, ordinals=ordinals), evidence),
    }
    scrubbed: Episode = _scrub(episode)
    return scrubbed


def lessons(episodes: Iterable[Any], skill: str, version: str) -> list[Lesson]:
    """Failure clusters of ``skill`` at ``version``, most frequent first.

    Tool failures are grouped by ``(tool_id, error_code)`` (the record status stands in for a
    missing code); unverified criteria by ``(criterion_id, status)``. Episodes of any other
    skill or version are ignored. Each lesson carries counts and a short advisory text.
    """
    try:
        scoped = [e for e in _safe_list(episodes) if _in_scope(e, skill, version)]
        counts: Counter[tuple[str, str, str]] = Counter()
        seen: defaultdict[tuple[str, str, str], set[int]] = defaultdict(set)
        for index, episode in enumerate(scoped):
            for key in _failure_keys(episode):
                counts[key] += 1
                seen[key].add(index)
        scope = (skill, version)
        found = [_lesson(scope, key, n, len(seen[key]), len(scoped)) for key, n in counts.items()]
    except Exception:  # fail-open: no lessons rather than a failed task
        log.exception("could not derive lessons for %s %s", skill, version)
        return []
    found.sort(key=lambda lesson: (-lesson["count"], lesson["kind"], lesson["key"]))
    return found


def record_episode(
    log_: ExperienceLog,
    task: Mapping[str, Any],
    revisions: Sequence[Mapping[str, Any]],
    records: Sequence[Mapping[str, Any]],
    verdicts: Sequence[Mapping[str, Any]],
    evidence: Sequence[Mapping[str, Any]],
    binding: Mapping[str, Any],
) -> Episode | None:
    """Build and keep the episode of a terminal task; ``None`` (logged) on any failure."""
    try:
        episode = episode_from(task, revisions, records, verdicts, evidence, binding)
        skill, version = episode["skill"], episode["version"]
        if skill is None or version is None:
            log.warning("episode of task skipped: the binding names no skill version")
            return None
        log_.add_episode(str(task["task_id"]), skill, version, episode)
        return episode
    except Exception:  # experience is fail-open by contract
        log.exception("could not record an episode")
        return None


# -- episode pieces -------------------------------------------------------------------------


def _verdicts_by(verdicts: Sequence[Mapping[str, Any]]) -> dict[Any, Mapping[str, Any]]:
    """Loose verdicts keyed by ``revision_id``, else by position."""
    found: dict[Any, Mapping[str, Any]] = {}
    for position, verdict in enumerate(_safe_list(verdicts)):
        if isinstance(verdict, Mapping):
            rid = verdict.get("revision_id")
            found[rid if isinstance(rid, str) else position] = verdict
    return found


def _revision(item: tuple[int, Any], verdicts: Mapping[Any, Mapping[str, Any]]) -> EpisodeRevision:
    position, revision = item
    rid = _get(revision, "revision_id")
    own = _mapping(_get(revision, "verdict"))
    verdict = (
        own or verdicts.get(rid if isinstance(rid, str) else position) or verdicts.get(position)
    )
    verdict = _mapping(verdict)
    return {
        "revision": fingerprint(rid),
        "ordinal": _count(_get(revision, "ordinal")),
        "verdict": token(verdict.get("status")),
        "criteria": _each(_criterion, verdict.get("results")),
    }


def _criterion(result: Any) -> EpisodeCriterion:
    return {
        "criterion_id": token(_get(result, "criterion_id")),
        "status": token(_get(result, "status")),
    }


def _record(record: Any, ordinals: Mapping[str, int]) -> EpisodeRecord:
    error = _mapping(_get(record, "error")) or _mapping(
        _get(_mapping(_get(record, "result")), "error")
    )
    return {
        "revision_ordinal": _ordinal_of(record, ordinals),
        "tool_id": token(_get(record, "tool_id")),
        "semantics": token(_get(record, "semantics")),
        "ownership": token(_get(record, "ownership")),
        "status": token(_get(record, "state", "status")),
        "error_code": token(error.get("code") or _get(record, "error_code")),
        "invocation": fingerprint(_get(record, "invocation_id")),
        "attempt": fingerprint(_get(record, "attempt_id")),
    }


def _artifact(artifact: Any, ordinals: Mapping[str, int]) -> EpisodeArtifact:
    error = _mapping(_get(artifact, "error"))
    digest = _get(artifact, "sha256")
    return {
        "revision_ordinal": _ordinal_of(artifact, ordinals),
        "source": token(_get(artifact, "source")),
        "phase": token(_get(artifact, "phase")),
        "sha256": digest if isinstance(digest, str) and _SHA256.match(digest) else None,
        "capture_error": token(error.get("code")) if error else None,
    }


def _ordinal_of(item: Any, ordinals: Mapping[str, int]) -> int | None:
    rid = _get(item, "revision_id")
    return ordinals.get(rid) if isinstance(rid, str) else None


def _ordinals(revisions: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    found: dict[str, int] = {}
    for position, revision in enumerate(_safe_list(revisions)):
        rid = _get(revision, "revision_id")
        if isinstance(rid, str):
            found[rid] = _count(_get(revision, "ordinal")) or position + 1
    return found


# -- lesson pieces --------------------------------------------------------------------------


def _in_scope(episode: Any, skill: str, version: str) -> bool:
    return isinstance(episode, Mapping) and (episode.get("skill"), episode.get("version")) == (
        skill,
        version,
    )


def _failure_keys(episode: Mapping[str, Any]) -> Iterable[tuple[str, str, str]]:
    """``("tool_failure", tool_id, code)`` and ``("verification", criterion_id, status)``."""
    for record in _safe_list(episode.get("records")):
        status, code = _get(record, "status"), _get(record, "error_code")
        if _one_of(status, FAILED_RECORD_STATES) or code:
            yield "tool_failure", str(_get(record, "tool_id") or "?"), str(code or status)
    for revision in _safe_list(episode.get("revisions")):
        for result in _safe_list(_get(revision, "criteria")):
            if _one_of(status := _get(result, "status"), UNVERIFIED):
                yield "verification", str(_get(result, "criterion_id") or "?"), str(status)


def _lesson(
    scope: tuple[str, str], key: tuple[str, str, str], count: int, episodes: int, total: int
) -> Lesson:
    kind, subject, code = key
    if kind == "tool_failure":
        return _tool_lesson(scope, (subject, code), count, episodes, total)
    return _check_lesson(scope, (subject, code), count, episodes, total)


def _tool_lesson(
    scope: tuple[str, str], key: tuple[str, str], count: int, episodes: int, total: int
) -> ToolLesson:
    tool_id, code = key
    hint = _HINTS.get(code, "check its readiness and preconditions before calling it")
    return {
        "skill": scope[0],
        "version": scope[1],
        "kind": "tool_failure",
        "key": f"{tool_id}/{code}",
        "tool_id": tool_id,
        "error_code": code,
        "count": count,
        "episodes": episodes,
        "of_episodes": total,
        "advice": f"{tool_id} ended {code} {count}x in {episodes} of {total} episodes; {hint}.",
    }


def _check_lesson(
    scope: tuple[str, str], key: tuple[str, str], count: int, episodes: int, total: int
) -> CheckLesson:
    criterion_id, status = key
    return {
        "skill": scope[0],
        "version": scope[1],
        "kind": "verification",
        "key": f"{criterion_id}/{status}",
        "criterion_id": criterion_id,
        "status": status,
        "count": count,
        "episodes": episodes,
        "of_episodes": total,
        "advice": (
            f"criterion {criterion_id} was {status} {count}x in {episodes} of {total} "
            "episodes; confirm the goal state before finalizing."
        ),
    }


# -- defensive helpers ----------------------------------------------------------------------


def _get(item: Any, *keys: str) -> Any:
    if not isinstance(item, Mapping):
        return None
    for key in keys:
        if item.get(key) is not None:
            return item[key]
    return None


def _one_of(value: Any, choices: frozenset[str]) -> bool:
    return isinstance(value, str) and value in choices


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _safe_list(value: Any) -> list[Any]:
    if isinstance(value, Mapping | str | bytes) or not isinstance(value, Iterable):
        return []
    return list(value)


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _version(value: Any) -> str | None:
    # The skill's own version is the one number an episode keeps; never a physical one.
    return value if isinstance(value, str) and _VERSION.match(value) else None


def _each[T](build: Callable[[Any], T], items: Any) -> list[T]:
    """``build`` applied to every item; an item it cannot handle is logged and skipped."""
    kept: list[T] = []
    for item in _safe_list(items):
        try:
            kept.append(build(item))
        except Exception:  # fail-open: one odd entry must not cost the episode
            log.warning("experience: skipped a malformed entry", exc_info=True)
    return kept


def _scrub(value: Any) -> Any:
    """Last line of defence: drop any URL that slipped into a kept string."""
    if isinstance(value, str):
        return _URL.sub("", value)
    if isinstance(value, Mapping):
        return {key: _scrub(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_scrub(item) for item in value]
    return value
