"""Motion-control building blocks shared by the robot ToolEndpoint providers.

The arm and gripper providers talk to a robot only through the Dora data plane
(``joint_state`` in, ``joint_command`` out). This package holds what both need: the
joint-state cache and command publisher (:mod:`~nodes.motion.plane`), minimum-jerk joint
trajectories (:mod:`~nodes.motion.trajectory`), the trajectory follower with settle, state
loss and timeout detection (:mod:`~nodes.motion.follow`), strict argument reading
(:mod:`~nodes.motion.arguments`) and the cancellable Action that ties them together under a
one-motion-at-a-time guard (:mod:`~nodes.motion.action`).
"""
