"""The ``scene_state`` JSON of the ``world`` endpoint, written from the typed scene state.

The shape is a wire contract: the ToolSpec output schema of ``world.scene_state`` (and of
``world.reset``'s ``scene``) pins it and PAOS's state verifier reads paths in it. Keys
appear in this order::

    {"objects": {"cube": {"position", "orientation_wxyz", "linear_velocity", "size"}},
     "target_zone": {"center", "half_extents"},
     "gripper": {"width", "joint_positions", "tool_position"},
     "sim_time", "seed", "predicates"?}

Vectors are JSON arrays of numbers; ``predicates`` (name -> bool) is present when given.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from doraforge.sim.state import GripperState, ObjectState, SceneState, Zone

type SceneJson = dict[str, Any]


def scene_json(state: SceneState, predicates: Mapping[str, bool] | None = None) -> SceneJson:
    """``state`` as the endpoint's JSON object, with ``predicates`` appended when given."""
    document: SceneJson = {
        "objects": {name: _object(obj) for name, obj in state.objects.items()},
        "target_zone": _zone(state.target_zone),
        "gripper": _gripper(state.gripper),
        "sim_time": state.sim_time,
        "seed": state.seed,
    }
    if predicates is not None:
        document["predicates"] = dict(predicates)
    return document


def _object(obj: ObjectState) -> dict[str, list[float]]:
    return {
        "position": list(obj.position),
        "orientation_wxyz": list(obj.orientation_wxyz),
        "linear_velocity": list(obj.linear_velocity),
        "size": list(obj.size),
    }


def _zone(zone: Zone) -> dict[str, list[float]]:
    return {"center": list(zone.center), "half_extents": list(zone.half_extents)}


def _gripper(gripper: GripperState) -> dict[str, Any]:
    return {
        "width": gripper.width,
        "joint_positions": dict(gripper.joint_positions),
        "tool_position": list(gripper.tool_position),
    }
