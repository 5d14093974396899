"""The ``world`` provider: the simulated robot's Dora Adapter (physics, cameras, scene)."""
