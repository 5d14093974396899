"""The wire rules every doraforge edge shares, each written once.

- :mod:`~doraforge.wire.strict_json` and :mod:`~doraforge.wire.strict_yaml`: the strict
  readers of everything that arrives (bodies, configurations, manifests, journals).
- :mod:`~doraforge.wire.canonical`: canonical JSON and its SHA-256, the form every
  identity (ToolSpec hash, binding, fingerprint, ETag) is taken over.
- :mod:`~doraforge.wire.errors`: the structured error base of every package's error tree.
- :mod:`~doraforge.wire.guard` and :mod:`~doraforge.wire.tokens`: the transport guard
  (authentication, Origin/Host, JSON-only, streamed body limits) and its bearer tokens.
- :mod:`~doraforge.wire.frames`: frame conventions the Gateway's ToolSpecs and the robot
  profiles share.
- :mod:`~doraforge.wire.toolcodec` and :mod:`~doraforge.wire.envelope_check`: the Provider
  Wire's ``forge_msgs.ToolMessage`` codec, shared by the Gateway and the providers. These
  two import forge-tool, forge-msgs and pyarrow; the rest imports only the standard
  library, PyYAML, pydantic and Starlette's types.

It imports no other doraforge package, so the Gateway, the providers, PAOS, the Skill
Runtime and the registry can all use it without importing one another.
"""
