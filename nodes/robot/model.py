"""The robot's kinematic model as a ``mujoco.MjSpec``, built from its profile.

A profile names its MJCF either as a path (relative to the profile file) or as an asset of
an installed package, ``package:<module>:<asset>`` — for example
``package:openarm_mujoco.v2:openarm_bimanual.xml`` for the OpenArm MJCF that
``openarm-mujoco`` installs. A model from a package rarely carries the frames doraforge
needs (a tool-centre site between the finger pads, a wrist camera), so the profile may add
``sites`` and ``cameras`` to named bodies; they are added through ``MjSpec`` at load time and
never written back to the package. The arm controller's IK and the simulated world both
build their model here, so the tool frame the controller solves for is the one the world
reports.
"""

from __future__ import annotations

import importlib
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # MuJoCo loads lazily: a world node picks its GL backend first
    import mujoco

    from doraforge.nodes.robot.profile import ModelCamera, ModelSite, RobotProfile

PACKAGE_SCHEME = "package:"


class ModelUnavailable(ValueError):
    """The model a profile names cannot be found or loaded (the message says what to
    install or fix)."""

    code = "ROBOT_MODEL_UNAVAILABLE"
    retryable = False


def resolve_model_file(reference: str, relative_to: Path) -> Path:
    """The MJCF file ``reference`` names: a path relative to ``relative_to`` or a
    ``package:<module>:<asset>`` asset. Raises :class:`ModelUnavailable` when the module is
    not installed or the file does not exist."""
    if not reference.startswith(PACKAGE_SCHEME):
        path = (relative_to / reference).resolve()
        if not path.is_file():
            raise ModelUnavailable(f"model_file {reference!r} does not exist")
        return path
    module_name, _, asset = reference.removeprefix(PACKAGE_SCHEME).partition(":")
    if not module_name or not asset:
        raise ModelUnavailable(
            f"model_file {reference!r}: write package:<module>:<asset>, "
            "e.g. package:openarm_mujoco.v2:openarm_bimanual.xml"
        )
    path = _package_asset(module_name, asset)
    if not path.is_file():
        raise ModelUnavailable(f"model_file {reference!r}: {path} does not exist")
    return path


def _package_asset(module_name: str, asset: str) -> Path:
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ModelUnavailable(
            f"model package {module_name!r} is not installed ({exc}); "
            "install the robot's model package into doraforge's environment"
        ) from exc
    # Description packages that install their MJCF as data files (openarm-mujoco puts it
    # under <prefix>/share) expose a resolver; otherwise the asset sits inside the module.
    resolver = getattr(module, "asset_path", None)
    if callable(resolver):
        return Path(str(resolver(asset)))
    return Path(str(files(module_name) / asset))


def robot_spec(profile: RobotProfile) -> mujoco.MjSpec:
    """The profile's MJCF with the profile's extra sites and cameras added, everything at
    the world level moved onto the profile's ``mount`` (so the spec's world frame is the
    base frame) and, with ``gravity_compensation``, every body compensated for gravity.

    Raises :class:`ModelUnavailable` when the file does not load or a frame cannot be
    added."""
    import mujoco

    try:
        spec = mujoco.MjSpec.from_file(str(profile.model_file))
    except ValueError as exc:
        raise ModelUnavailable(f"cannot load {profile.model_file}: {exc}") from exc
    for site in profile.sites:
        _add_site(spec, site)
    for camera in profile.cameras:
        _add_camera(spec, camera)
    if not profile.mount.is_identity:
        _mount(spec, profile.mount.pos, profile.mount.quat)
    if profile.gravity_compensation:
        # The arm's own controller feeds gravity forward (as sim_arm's gravcomp bodies):
        # the position servos then track without sag; a held object is not compensated.
        for body in spec.bodies[1:]:
            body.gravcomp = 1.0
    return spec


def compile_robot(profile: RobotProfile) -> mujoco.MjModel:
    """The compiled robot model (what the arm controller's kinematics loads)."""
    spec = robot_spec(profile)
    try:
        return spec.compile()
    except ValueError as exc:
        raise ModelUnavailable(f"cannot compile {profile.model_file}: {exc}") from exc


MOUNT_FRAME = "doraforge_mount"


def _mount(spec: mujoco.MjSpec, pos: list[float], quat: list[float]) -> None:
    # Every world-level element (not the lights of a scene: a robot file has none that
    # matter) hangs from one frame at the mount pose; nested elements follow their parents.
    world = spec.worldbody
    children = [*world.bodies, *world.geoms, *world.sites, *world.cameras, *world.frames]
    frame = world.add_frame(name=MOUNT_FRAME, pos=list(pos), quat=list(quat))
    for child in children:
        if child.frame is None:
            child.set_frame(frame)


def _body(spec: mujoco.MjSpec, name: str) -> mujoco.MjsBody:
    body = spec.body(name)
    if body is None:
        raise ModelUnavailable(f"{spec.modelname}: no body {name!r} to add a frame to")
    return body


def _add_site(spec: mujoco.MjSpec, site: ModelSite) -> None:
    if spec.site(site.name) is not None:
        raise ModelUnavailable(f"{spec.modelname}: site {site.name!r} already exists")
    _body(spec, site.body).add_site(
        name=site.name, pos=list(site.pos), quat=list(site.quat), size=[0.005, 0.005, 0.005]
    )


def _add_camera(spec: mujoco.MjSpec, camera: ModelCamera) -> None:
    if spec.camera(camera.name) is not None:
        raise ModelUnavailable(f"{spec.modelname}: camera {camera.name!r} already exists")
    _body(spec, camera.body).add_camera(
        name=camera.name, pos=list(camera.pos), quat=list(camera.quat), fovy=camera.fovy
    )
