"""The arm ToolEndpoint provider and its kinematics."""
