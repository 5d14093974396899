"""``arm.move_to_pose`` with ``path: "linear"`` under a real ``dora run dataflows/sim.yml``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from tests.e2e.conftest import MockStack, sim_stack
from tests.support.geometry import distance_to_segment

pytestmark = pytest.mark.e2e

#: Measured tool-centre distance from the line allowed under physics (m): tracking lag
#: runs along the line, so the sideways error stays small.
SIM_LINE_TOLERANCE_M = 0.01


@pytest.fixture(scope="module")
def cell(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MockStack]:
    with sim_stack(tmp_path_factory.mktemp("sim-linear")) as running:
        yield running


def tool_position(cell: MockStack) -> np.ndarray:
    response = cell.http.post("/tools/world/scene_state:invoke", json={"arguments": {}})
    outputs = cell.data(response)["response"]["result"]["outputs"]
    return np.array(outputs["gripper"]["tool_position"], dtype=float)


def test_a_linear_move_keeps_the_measured_tool_on_the_line(cell: MockStack) -> None:
    home = cell.start("arm.home", {})
    assert cell.terminal(home["invocation_id"], timeout_s=60.0)["phase"] == "completed"
    start = tool_position(cell)
    end = start + np.array([0.1, 0.2, -0.15])
    admitted = cell.start(
        "arm.move_to_pose", {"position": end.tolist(), "path": "linear", "speed": 0.1}
    )
    seen: list[np.ndarray] = []

    def done(status: dict[str, Any]) -> bool:
        seen.append(tool_position(cell))
        return bool(status["terminal"])

    final = cell.poll(admitted["invocation_id"], done, timeout_s=60.0)
    assert final["phase"] == "completed", final
    assert len(seen) >= 5
    assert max(distance_to_segment(p, start, end) for p in seen) < SIM_LINE_TOLERANCE_M
    assert np.linalg.norm(tool_position(cell) - end) < 0.01


def test_an_infeasible_line_is_refused_with_its_code_and_nothing_moves(cell: MockStack) -> None:
    before = tool_position(cell)
    refused = cell.invoke("arm.move_to_pose", {"position": [0.55, 0.4, 0.4], "path": "linear"})
    assert refused.status_code == 422, refused.text
    error = refused.json()["error"]
    # The Gateway's pre-dispatch code; the provider's own code and details ride along.
    assert error["code"] == "FORGE_TOOL_ACTION_ADMISSION_REJECTED"
    assert error["details"]["provider_code"] == "ARM_LINEAR_PATH_INFEASIBLE"
    details = error["details"]["provider_error"]["details"]
    # Past the reach the seeded IK either fails or leaps to another branch.
    assert details["reason"] in ("no IK solution", "joint jump between neighbouring waypoints")
    assert 0 < details["waypoint"] < details["waypoints"]
    assert np.linalg.norm(tool_position(cell) - before) < 1e-3
