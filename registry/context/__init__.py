"""Agent context over MCP: five read-only context tools over doraforge's own state.

Sources (:mod:`.source`) snapshot one scope each (navigation, skills, tools, tasks,
evidence, runtime) as :class:`~.source.ContextItem` records with opaque references; the
service (:mod:`.service`) answers ``context_profile``, ``search_context``, ``get_context``,
``list_context`` and ``resolve_navigation`` over them within the spec's budgets and the
active disclosure profile. Nothing here calls a tool or moves the robot.
"""
