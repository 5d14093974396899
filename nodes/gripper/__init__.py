"""The gripper ToolEndpoint provider: ``grasp``, ``release`` and ``gripper_state``."""
