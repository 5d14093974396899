"""Entry point of the arm provider node: ``python -m doraforge.nodes.arm [--profile NAME_OR_PATH]
[--arm NAME]`` (a second arm registers as ``arm_<NAME>``).

Dataflow stanza::

    - id: arm
      path: python
      args: -m doraforge.nodes.arm
      inputs:
        tool_request: gateway/arm_out
        joint_state: world/joint_state
      outputs:
        - tool_response
        - joint_command
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from doraforge.nodes.arm.config import from_profile
from doraforge.nodes.arm.endpoint import definition
from doraforge.nodes.arm.kinematics import Kinematics
from doraforge.nodes.motion.cli import parse_robot_node
from doraforge.nodes.runner import run_endpoint


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``arm`` endpoint as a Dora node until Dora stops it."""
    options, profile = parse_robot_node("doraforge arm ToolEndpoint provider", argv, os.environ)
    endpoint = definition(
        from_profile(profile), Kinematics(profile), endpoint_id=profile.endpoint_id("arm")
    )
    return run_endpoint(endpoint, options=options)


if __name__ == "__main__":
    sys.exit(main())
