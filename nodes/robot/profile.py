"""A strict, typed robot profile loaded from YAML.

The profile is the only place robot-specific numbers live for the endpoint nodes: joint
names and limits, the home pose, the kinematic model file, frames, the workspace box and the
gripper's width-to-joint mapping. It is read as strict YAML (:mod:`doraforge.wire.strict_yaml`:
no duplicate keys, aliases or ``yes`` booleans) and unknown keys are errors; every error
names the field and the file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Self

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from doraforge.nodes.robot.limits import check_box, check_home, check_joint
from doraforge.nodes.robot.model import ModelUnavailable, resolve_model_file
from doraforge.wire import strict_yaml
from doraforge.wire.frames import AxisDirection

type Name = Annotated[str, Field(min_length=1, max_length=128)]
type FiniteFloat = Annotated[float, Field(allow_inf_nan=False)]
type PositiveFloat = Annotated[float, Field(gt=0, allow_inf_nan=False)]
type Vec3 = Annotated[list[FiniteFloat], Field(min_length=3, max_length=3)]


class ProfileError(ValueError):
    """A robot profile file is missing, unreadable or invalid (the message names the field
    and the file)."""

    code = "ROBOT_PROFILE_INVALID"
    retryable = False


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ArmJoint(_Strict):
    """One arm joint: data-plane name, position limits (rad) and speed limit (rad/s)."""

    name: Name
    lower: FiniteFloat
    upper: FiniteFloat
    max_velocity: PositiveFloat

    @model_validator(mode="after")
    def _ordered(self) -> Self:
        check_joint(self)
        return self


class WorkspaceBox(_Strict):
    """Axis-aligned box in the base frame (m) that tool targets must lie in."""

    min: Vec3
    max: Vec3

    @model_validator(mode="after")
    def _ordered(self) -> Self:
        check_box(self.min, self.max)
        return self

    def contains(self, point: list[float] | tuple[float, ...]) -> bool:
        """True when ``point`` (base frame, m) lies inside the box, faces included."""
        return all(lo <= p <= hi for lo, p, hi in zip(self.min, point, self.max, strict=True))


class WidthMapping(_Strict):
    """Linear map from finger width (m, between the pads) to gripper joint position:
    ``joint = scale * width + offset``."""

    scale: FiniteFloat
    offset: FiniteFloat = 0.0

    def joint_for(self, width: float) -> float:
        return self.scale * width + self.offset

    def width_for(self, joint: float) -> float:
        return (joint - self.offset) / self.scale


class GripperProfile(_Strict):
    """Gripper joints (data-plane names) and its widths (m)."""

    joints: Annotated[list[Name], Field(min_length=1)]
    open_width: PositiveFloat
    closed_width: Annotated[float, Field(ge=0, allow_inf_nan=False)]
    max_width: PositiveFloat
    joint_for_width: WidthMapping

    @model_validator(mode="after")
    def _widths(self) -> Self:
        if not self.closed_width < self.open_width <= self.max_width:
            raise ValueError("gripper widths must satisfy closed_width < open_width <= max_width")
        if self.joint_for_width.scale == 0:
            raise ValueError("gripper joint_for_width.scale must not be zero")
        return self


class Tolerances(_Strict):
    """When a motion counts as arrived: tool position error (m) and joint speed (rad/s)."""

    position_m: PositiveFloat = 0.005
    settle_velocity: PositiveFloat = 0.02


type Quat = Annotated[list[FiniteFloat], Field(min_length=4, max_length=4)]


class ModelSite(_Strict):
    """A site the profile adds to the model (``pos`` m, ``quat`` wxyz, in ``body``'s frame):
    usually the tool centre between the finger pads of a packaged model."""

    name: Name
    body: Name
    pos: Vec3
    quat: Quat = Field(default_factory=lambda: [1.0, 0.0, 0.0, 0.0])


class ModelCamera(_Strict):
    """A camera the profile adds to the model, looking along its own -z (MuJoCo's rule)."""

    name: Name
    body: Name
    pos: Vec3
    quat: Quat = Field(default_factory=lambda: [1.0, 0.0, 0.0, 0.0])
    fovy: Annotated[float, Field(gt=0, lt=180, allow_inf_nan=False)] = 60.0


class RobotProfile(_Strict):
    """Everything the robot-agnostic endpoints need to know about one robot."""

    robot_id: Name
    base_frame: Name
    tool_frame: Name
    frames: dict[Name, Name] = Field(default_factory=dict)
    directions: dict[Name, AxisDirection] = Field(default_factory=dict)
    model_file: Path
    sites: list[ModelSite] = Field(default_factory=list)
    cameras: list[ModelCamera] = Field(default_factory=list)
    tool_site: Name
    arm_joints: Annotated[list[ArmJoint], Field(min_length=1)]
    home: list[FiniteFloat]
    workspace: WorkspaceBox
    gripper: GripperProfile
    tolerances: Tolerances = Field(default_factory=Tolerances)

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        names = [joint.name for joint in self.arm_joints]
        if len(set(names)) != len(names):
            raise ValueError("arm_joints names must be unique")
        if set(names) & set(self.gripper.joints):
            raise ValueError("gripper.joints must not repeat arm joint names")
        check_home(self.arm_joints, self.home)
        return self

    @property
    def arm_joint_names(self) -> list[str]:
        return [joint.name for joint in self.arm_joints]

    @property
    def joint_names(self) -> list[str]:
        """Arm joints then gripper joints: the data-plane order."""
        return [*self.arm_joint_names, *self.gripper.joints]


def load_profile(path: str | Path) -> RobotProfile:
    """Load and validate a profile; ``model_file`` is resolved relative to the profile file
    or, written ``package:<module>:<asset>``, inside an installed model package
    (:func:`doraforge.nodes.robot.model.resolve_model_file`).

    Raises :class:`ProfileError` naming the file (and the field for validation errors), or
    when the model file does not exist.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ProfileError(f"{path}: cannot read robot profile: {exc}") from exc
    try:
        document = strict_yaml.load(text)
    except strict_yaml.YAMLRefused as exc:
        raise ProfileError(f"{path}: {exc.field}: {exc.message}") from exc
    if not isinstance(document, dict):
        raise ProfileError(f"{path}: a robot profile must be a mapping")
    try:
        profile = RobotProfile.model_validate(document)
    except ValidationError as exc:
        raise ProfileError(f"{path}: {_describe(exc)}") from exc
    try:
        model_file = resolve_model_file(str(document.get("model_file")), path.parent)
    except ModelUnavailable as exc:
        raise ProfileError(f"{path}: {exc}") from exc
    return profile.model_copy(update={"model_file": model_file})


def _describe(exc: ValidationError) -> str:
    parts = []
    for error in exc.errors():
        field = ".".join(str(part) for part in error["loc"]) or "<root>"
        parts.append(f"{field}: {error['msg']}")
    return "; ".join(parts)
