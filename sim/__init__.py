"""doraforge's simulated robot cell (MuJoCo), importable without Dora.

The cell (``sim/assets/cell.xml``) is a table whose top is the plane z = 0, the 6-DOF
``sim_arm`` with a parallel two-finger gripper (``sim/assets/arm.xml``, loadable alone as the
controller's kinematic model), a 45 mm red cube on a free joint, and a green target zone.

Frames and units: the world frame is the robot base frame (the arm base on the table top;
x away from the robot across the table, y to its left, z up). Metres, kilograms, seconds,
radians; quaternions are (w, x, y, z). The tool frame is the site ``tool_center`` midway
between the finger pads, its z axis the approach direction; "pointing down" means tool z =
-base z, and yaw is the angle of the tool x axis about base z.

Joints (data-plane names): ``shoulder_pan, shoulder_lift, elbow, forearm_roll,
wrist_pitch, wrist_roll`` (rad) and ``gripper`` (m, one finger's opening; the other finger
mirrors it, so the width between the pads is twice the joint value, 0 to 0.08 m). Every joint
has a position actuator of the same name. Cameras: ``scene`` (fixed, looking at the
workspace) and ``wrist`` (on the hand, looking along the tool z axis).

Other robots: :mod:`sim.cell` composes a cell with ``MjSpec`` from doraforge's furniture
(``sim/assets/furniture.xml``: the same table, cube, target zone, scene camera and lights)
and any robot MJCF at its mount, and a :class:`~sim.layout.RobotLayout` tells the world which
joints, actuators (joint or tendon grippers), sites and cameras are each arm's
(:data:`~sim.layout.SIM_ARM_LAYOUT` is the default cell's). The world node builds both from a
robot profile (``nodes/world/layout.py``); OpenArm v2 ships that way.

Modules, split as dm_control splits Physics from Task:

- :mod:`sim.layout`: :class:`~sim.layout.RobotLayout` (arms, grippers, base frame, cameras,
  cube region), plain data.
- :mod:`sim.cell`: :func:`~sim.cell.compose_cell`, furniture plus a robot spec.
- :mod:`sim.world`: :class:`~sim.world.World`, the physics state (targets in, joint state and
  a typed scene state out, free bodies placed, divergence detection). Its reset restores the
  model and draws nothing.
- :mod:`sim.state`: :class:`~sim.state.SceneState`, the frozen scene snapshot (objects, target
  zone, gripper, sim time, episode seed) that predicates judge.
- :mod:`sim.task`: the :class:`~sim.task.Task` contract (``initialize_episode(physics, rng)``,
  named ``predicates``, ``success(state)``) and the :class:`~sim.task.TaskRegistry`.
- :mod:`sim.tasks`: the registered tasks (``TASKS``); :mod:`sim.tasks.pick_place` draws the
  seeded cube region and judges ``cube_in_target_and_resting`` and ``cube_lifted``.
- :mod:`sim.environment`: :class:`~sim.environment.Environment`, a physics and a task: reset
  restores the physics and lets the task draw from the episode's seed.
- :mod:`sim.errors`: ``SimError`` and its coded subclasses ``PhysicsDiverged``
  (``SIM_PHYSICS_DIVERGED``), ``RenderUnavailable`` (``SIM_RENDER_UNAVAILABLE``),
  ``DuplicateTask`` and ``UnknownTask``.
- :mod:`sim.render`: :func:`~sim.render.gl_backend` (EGL, else OSMesa; call it before
  importing ``mujoco``) and :class:`~sim.render.Cameras` (480x640 RGB by default).

Rendering: lights cast no shadows unless ``World(shadows=True)``, because on CPU (Mesa)
shadows cost roughly 9x per frame.
"""
