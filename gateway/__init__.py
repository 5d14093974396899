"""The doraforge Gateway: a Forge-compatible HTTP Tool API over Dora ToolEndpoints."""
