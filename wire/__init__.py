"""The wire rules every doraforge edge shares: strict JSON, the structured error base and
the transport guard (authentication, Origin/Host, JSON-only, streamed body limits).

It imports only the standard library and Starlette's types, so the Gateway, the providers,
PAOS and the registry can all use it without importing one another.
"""
