"""doraforge: a robot tool stack on Dora (Forge ToolEndpoints, Gateway, PAOS, registry)."""
