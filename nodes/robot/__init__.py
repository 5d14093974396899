"""Robot description shared by the robot-agnostic ToolEndpoint nodes (arm, gripper, camera).

Code here is generic; everything specific to one robot lives in a YAML profile under
``nodes/robot/profiles/`` loaded by :func:`nodes.robot.profile.load_profile`.
"""
