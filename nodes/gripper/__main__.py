"""Entry point of the gripper provider node: ``python -m doraforge.nodes.gripper [--profile PATH]``.

Dataflow stanza::

    - id: gripper
      path: python
      args: -m doraforge.nodes.gripper
      inputs:
        tool_request: gateway/gripper_out
        joint_state: world/joint_state
      outputs:
        - tool_response
        - joint_command
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from doraforge.nodes.gripper.config import from_profile
from doraforge.nodes.gripper.endpoint import definition
from doraforge.nodes.motion.cli import parse_robot_node
from doraforge.nodes.runner import run_endpoint


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``gripper`` endpoint as a Dora node until Dora stops it."""
    options, profile = parse_robot_node("doraforge gripper ToolEndpoint provider", argv, os.environ)
    endpoint = definition(from_profile(profile), endpoint_id=profile.endpoint_id("gripper"))
    return run_endpoint(endpoint, options=options)


if __name__ == "__main__":
    sys.exit(main())
