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
    """Gripper joints (data-plane names) and its widths (m).

    For the simulated world: ``actuator`` names the model actuator driving the first joint
    (a joint or a tendon transmission; default: the actuator on that joint), with
    ``ctrl_for_joint`` turning a joint position into its control (a tendon actuator's
    control is a tendon length); ``mimic`` is the model's second finger joint, set with the
    first at reset (the model's own equality keeps them together).
    """

    joints: Annotated[list[Name], Field(min_length=1)]
    open_width: PositiveFloat
    closed_width: Annotated[float, Field(ge=0, allow_inf_nan=False)]
    max_width: PositiveFloat
    joint_for_width: WidthMapping
    actuator: Name | None = None
    ctrl_for_joint: WidthMapping = Field(default_factory=lambda: WidthMapping(scale=1.0))
    mimic: Name | None = None

    @model_validator(mode="after")
    def _widths(self) -> Self:
        if not self.closed_width < self.open_width <= self.max_width:
            raise ValueError("gripper widths must satisfy closed_width < open_width <= max_width")
        if self.joint_for_width.scale == 0:
            raise ValueError("gripper joint_for_width.scale must not be zero")
        return self


class Tolerances(_Strict):
    """When a motion counts as arrived: tool position error (m) and joint speed (rad/s);
    and how close (m) an IK solution must put the tool (``ik_position_m``: an arm whose
    wrist limits cut its top-down reach converges to a millimetre or two short of the
    exact point)."""

    position_m: PositiveFloat = 0.005
    settle_velocity: PositiveFloat = 0.02
    ik_position_m: PositiveFloat = 0.001


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


class Mount(_Strict):
    """Where the robot model's origin sits in the base frame (``pos`` m, ``quat`` wxyz):
    the cell's table-top frame for a model whose origin is its shoulder, not its foot."""

    pos: Vec3 = Field(default_factory=lambda: [0.0, 0.0, 0.0])
    quat: Quat = Field(default_factory=lambda: [1.0, 0.0, 0.0, 0.0])

    @property
    def is_identity(self) -> bool:
        return self.pos == [0.0, 0.0, 0.0] and self.quat == [1.0, 0.0, 0.0, 0.0]


type Pair = Annotated[list[FiniteFloat], Field(min_length=2, max_length=2)]


class Range(_Strict):
    """An x and a y range on the table (base frame, m) and optionally a yaw range (rad)."""

    x: Pair
    y: Pair
    yaw: Pair | None = None

    @model_validator(mode="after")
    def _ordered(self) -> Self:
        for pair in (self.x, self.y, self.yaw or [0.0, 0.0]):
            if not pair[0] <= pair[1]:
                raise ValueError("ranges must be [low, high] with low <= high")
        return self


class SceneCamera(_Strict):
    """Where the cell's fixed ``scene`` camera stands and the point it looks at (base
    frame, m); its image x axis stays horizontal."""

    pos: Vec3
    look_at: Vec3

    @model_validator(mode="after")
    def _apart(self) -> Self:
        if self.pos == self.look_at:
            raise ValueError("scene_camera.pos and look_at must differ")
        return self


class CellProfile(_Strict):
    """How the simulated cell fits this robot's reach: the target zone's centre on the
    table, the region a task draws the cube from (base frame, m) and, for a workspace the
    default view compresses, where the scene camera looks from."""

    target_zone: Annotated[list[FiniteFloat], Field(min_length=2, max_length=2)] | None = None
    cube_region: Range | None = None
    scene_camera: SceneCamera | None = None


class ArmProfile(_Strict):
    """One arm of a robot: frames, joints, home, workspace and gripper."""

    tool_frame: Name
    tool_site: Name
    arm_joints: Annotated[list[ArmJoint], Field(min_length=1)]
    home: list[FiniteFloat]
    workspace: WorkspaceBox
    gripper: GripperProfile

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        names = [joint.name for joint in self.arm_joints]
        if len(set(names)) != len(names):
            raise ValueError("arm_joints names must be unique")
        if set(names) & set(self.gripper.joints):
            raise ValueError("gripper.joints must not repeat arm joint names")
        check_home(self.arm_joints, self.home)
        return self


_ARM_FIELDS = ("tool_frame", "tool_site", "arm_joints", "home", "workspace", "gripper")


class RobotProfile(_Strict):
    """Everything the robot-agnostic endpoints need to know about one robot.

    The top-level arm fields (``tool_frame``, ``tool_site``, ``arm_joints``, ``home``,
    ``workspace``, ``gripper``) are the primary arm, called ``primary_arm``; a robot with
    more arms lists the others under ``arms`` by name, and :meth:`for_arm` gives the
    profile an arm or gripper node of that arm reads. ``mount``, ``gravity_compensation``,
    ``data_plane_cameras`` and ``cell`` are for the simulated world only.
    """

    robot_id: Name
    base_frame: Name
    tool_frame: Name
    frames: dict[Name, Name] = Field(default_factory=dict)
    directions: dict[Name, AxisDirection] = Field(default_factory=dict)
    model_file: Path
    mount: Mount = Field(default_factory=Mount)
    gravity_compensation: bool = False
    sites: list[ModelSite] = Field(default_factory=list)
    cameras: list[ModelCamera] = Field(default_factory=list)
    data_plane_cameras: dict[Name, Name] = Field(default_factory=dict)
    tool_site: Name
    arm_joints: Annotated[list[ArmJoint], Field(min_length=1)]
    home: list[FiniteFloat]
    workspace: WorkspaceBox
    gripper: GripperProfile
    primary_arm: Name = "arm"
    arms: dict[Name, ArmProfile] = Field(default_factory=dict)
    cell: CellProfile = Field(default_factory=CellProfile)
    tolerances: Tolerances = Field(default_factory=Tolerances)
    #: Set by :meth:`for_arm` for an arm that is not the primary (not written in files).
    served_arm: Name | None = None

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        ArmProfile.model_validate({name: getattr(self, name) for name in _ARM_FIELDS})
        if self.primary_arm in self.arms:
            raise ValueError(f"arms must not repeat the primary arm {self.primary_arm!r}")
        names = self.data_plane_joint_names
        if len(set(names)) != len(names):
            raise ValueError("joint names must be unique across arms and grippers")
        return self

    @property
    def arm_joint_names(self) -> list[str]:
        return [joint.name for joint in self.arm_joints]

    @property
    def arm_names(self) -> list[str]:
        """The primary arm then the others, as ``--arm`` names them."""
        return [self.primary_arm, *self.arms]

    @property
    def joint_names(self) -> list[str]:
        """The primary arm's joints then its gripper joints: the data-plane order of a
        single-arm robot, and what an arm or gripper node of the primary arm tracks."""
        return [*self.arm_joint_names, *self.gripper.joints]

    @property
    def data_plane_joint_names(self) -> list[str]:
        """Every joint the robot's adapter publishes: :attr:`joint_names` then each
        further arm's joints and gripper joints (the world's ``joint_state`` order)."""
        names = self.joint_names
        for arm in self.arms.values():
            names += [joint.name for joint in arm.arm_joints] + list(arm.gripper.joints)
        return names

    def primary(self) -> ArmProfile:
        """The primary arm's fields as an :class:`ArmProfile`."""
        return ArmProfile.model_validate({name: getattr(self, name) for name in _ARM_FIELDS})

    def arm(self, name: str | None) -> ArmProfile:
        """Arm ``name`` (``None``: the primary); ``ProfileError`` names the known arms."""
        if name is None or name == self.primary_arm:
            return self.primary()
        found = self.arms.get(name)
        if found is None:
            raise ProfileError(
                f"robot {self.robot_id!r} has no arm {name!r}; arms: {self.arm_names}"
            )
        return found

    def for_arm(self, name: str | None) -> RobotProfile:
        """This profile as arm ``name`` sees it: that arm's fields at the top level, no
        further arms (so an arm or gripper node reads its own arm without knowing others),
        directions given in the primary tool frame moved to this arm's tool frame. Raises
        :class:`ProfileError` for an unknown arm."""
        if name is None or name == self.primary_arm:
            return self
        chosen = self.arm(name)
        fields = {field: getattr(chosen, field) for field in _ARM_FIELDS}
        # A direction in the primary arm's tool frame (approach) means each arm's own one.
        directions = {
            key: direction.model_copy(update={"frame": chosen.tool_frame})
            if direction.frame == self.tool_frame
            else direction
            for key, direction in self.directions.items()
        }
        update = {
            **fields,
            "directions": directions,
            "primary_arm": name,
            "arms": {},
            "served_arm": name,
        }
        return self.model_copy(update=update)

    def endpoint_id(self, base: str) -> str:
        """The endpoint id a node of this arm registers: ``base`` (``arm``, ``gripper``)
        for the primary arm, ``<base>_<arm>`` (``arm_left``) for another."""
        return base if self.served_arm is None else f"{base}_{self.served_arm}"


PROFILES_DIR = Path(__file__).resolve().parent / "profiles"


def shipped_profiles() -> list[str]:
    """The names of the robot profiles doraforge ships (``nodes/robot/profiles/*.yml``)."""
    return sorted(path.stem for path in PROFILES_DIR.glob("*.yml"))


def profile_path(name_or_path: str | Path) -> Path:
    """The profile file ``name_or_path`` means: a shipped profile's name (``sim_arm``,
    ``openarm``) or a path to a YAML file. Raises :class:`ProfileError` listing the shipped
    names when it is neither."""
    text = str(name_or_path)
    if text.endswith((".yml", ".yaml")) or "/" in text or Path(text).is_file():
        return Path(text)
    shipped = PROFILES_DIR / f"{text}.yml"
    if shipped.is_file():
        return shipped
    raise ProfileError(
        f"unknown robot {text!r}: choose one of {', '.join(shipped_profiles())} "
        "or give a profile file path"
    )


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
