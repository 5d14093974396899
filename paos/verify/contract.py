"""The verification contract a task carries: mode, goal, criteria, evidence policy, budget.

The contract is data only. ``parse_contract`` validates an agent-supplied dict strictly (no
unknown fields, no coercion) and raises :class:`InvalidContract` whose message names every
offending field, e.g. ``success_criteria.0.predicate.value_path: Field required``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from doraforge.paos.verify.errors import InvalidContract

Mode = Literal["off", "audit", "enforce", "recovery"]
Color = Literal["red", "green", "blue", "yellow"]
CriterionId = Annotated[str, Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_.:-]+$")]
DottedPath = Annotated[str, Field(min_length=1, max_length=256)]


class _Strict(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)


class InsideBox(_Strict):
    """The vector at ``value_path`` lies inside the axis-aligned box ``center ± half_extents``."""

    op: Literal["inside_box"]
    value_path: DottedPath
    center_path: DottedPath
    half_extents_path: DottedPath


class Compare(_Strict):
    """A scalar test of the value at ``value_path`` against ``value`` (unused by ``is_true``)."""

    op: Literal["equals", "less_than", "greater_than", "is_true"]
    value_path: DottedPath
    value: Any = None

    @model_validator(mode="after")
    def _value_fits_op(self) -> Compare:
        ordered = self.op in ("less_than", "greater_than")
        if ordered and (isinstance(self.value, bool) or not isinstance(self.value, int | float)):
            raise ValueError(f"value: {self.op} needs a number")
        if self.op == "equals" and "value" not in self.model_fields_set:
            raise ValueError("value: equals needs a value")
        return self


Predicate = Annotated[InsideBox | Compare, Field(discriminator="op")]


class StateCriterion(_Strict):
    """A predicate over the outputs of a Query tool read live at verification time."""

    kind: Literal["state"]
    id: CriterionId
    tool_id: Annotated[str, Field(min_length=1, max_length=256)]
    arguments: dict[str, Any] = Field(default_factory=dict)
    predicate: Predicate


class VisionCriterion(_Strict):
    """The ``object_color`` blob moved into the ``target_color`` region between the before
    and after frames of camera ``source``."""

    kind: Literal["vision"]
    id: CriterionId
    source: Annotated[str, Field(min_length=1, max_length=128)] = "scene"
    object_color: Color
    target_color: Color

    @model_validator(mode="after")
    def _distinct_colors(self) -> VisionCriterion:
        if self.object_color == self.target_color:
            raise ValueError("target_color: must differ from object_color")
        return self


class ExternalCriterion(_Strict):
    """An HTTP verifier: the context is POSTed to ``url``, which answers ``{"status": ...}``."""

    kind: Literal["external"]
    id: CriterionId
    url: Annotated[str, Field(min_length=1, max_length=2048)]
    timeout_s: Annotated[float, Field(gt=0, le=120)] = 10.0

    @field_validator("url")
    @classmethod
    def _http_url(cls, url: str) -> str:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("must be an absolute http(s) URL")
        return url


Criterion = Annotated[
    StateCriterion | VisionCriterion | ExternalCriterion, Field(discriminator="kind")
]


class EvidencePolicy(_Strict):
    """Which evidence sources must be present and how old an artifact may be."""

    required_sources: list[Annotated[str, Field(min_length=1, max_length=128)]] = Field(
        default_factory=list
    )
    max_age_s: Annotated[float, Field(gt=0)] | None = None


class VerificationContract(_Strict):
    """What a task must achieve and how strictly the verdict governs its outcome.

    ``enforce`` and ``recovery`` need at least one criterion: with none, nothing could
    prove success and the contract would fail every task.
    """

    mode: Mode
    goal: Annotated[str, Field(min_length=1, max_length=2000)]
    success_criteria: list[Criterion] = Field(default_factory=list, max_length=32)
    evidence_policy: EvidencePolicy = Field(default_factory=EvidencePolicy)
    replan_budget: Annotated[int, Field(ge=0, le=16)] = 1
    deadline_s: Annotated[float, Field(gt=0)] | None = None

    @model_validator(mode="after")
    def _criteria_fit_mode(self) -> VerificationContract:
        ids = [criterion.id for criterion in self.success_criteria]
        if len(ids) != len(set(ids)):
            raise ValueError("success_criteria: criterion ids must be unique")
        if self.mode in ("enforce", "recovery") and not ids:
            raise ValueError(f"success_criteria: mode {self.mode} needs at least one criterion")
        return self


def parse_contract(data: Any) -> VerificationContract:
    """Validate ``data`` (a JSON-shaped dict) into a contract.

    Raises :class:`InvalidContract` with one ``"<field path>: <reason>"`` per problem.
    """
    try:
        return VerificationContract.model_validate(data)
    except ValidationError as exc:
        errors = [_describe(error) for error in exc.errors(include_url=False)]
        raise InvalidContract(
            "invalid verification contract: " + "; ".join(errors), details={"errors": errors}
        ) from exc


def _describe(error: Any) -> str:
    loc = [str(part) for part in error["loc"] if not _is_union_tag(part)]
    message = str(error["msg"]).removeprefix("Value error, ")
    field, sep, rest = message.partition(": ")
    if sep and field.isidentifier():
        # Cross-field validators name their field as "<field>: <reason>".
        loc, message = [*loc, field], rest
    return f"{'.'.join(loc) or '<contract>'}: {message}"


def _is_union_tag(part: object) -> bool:
    # Discriminated unions put the tag (``state``, ``inside_box``) or the validator wrapper
    # into the location; dropped, the path reads like the JSON the caller wrote.
    return isinstance(part, str) and (part in _UNION_TAGS or part.startswith("function-"))


_UNION_TAGS = frozenset(
    {"state", "vision", "external", "inside_box", "equals", "less_than", "greater_than", "is_true"}
)
