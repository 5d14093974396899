"""The HTTP floor: the Gateway's HTTP stack answering a Query directly, without Dora.

Same server (uvicorn + httptools + uvloop), same framework, same transport guard and body
parsing and envelope code as the Gateway; only the Runtime, Dora and the provider are
missing.
"""

from __future__ import annotations

import sys

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import Response

from doraforge.gateway.http import ok, parse_invoke_body, read_json_object, render_refusal
from doraforge.gateway.main import new_loop, server_config
from doraforge.wire.guard import TransportGuard, policy_for_bind


def floor_app() -> FastAPI:
    """An app with the Gateway's Query route shape answering in-process."""
    app = FastAPI()

    @app.post("/tools/{endpoint_id}/{operation}:invoke")
    async def invoke(endpoint_id: str, operation: str, request: Request) -> Response:
        body = parse_invoke_body(read_json_object(request, allow_empty=False))
        result = {"status": "succeeded", "outputs": dict(body.arguments)}
        return ok(
            {
                "endpoint_id": endpoint_id,
                "operation": operation,
                "response": {"outcome": "completed", "result": result},
            }
        )

    @app.get("/health")
    async def health() -> Response:
        return ok({})

    policy = policy_for_bind("127.0.0.1", token=None, code_prefix="FORGE_TOOL_")
    app.add_middleware(TransportGuard, policy=policy, render=render_refusal)
    return app


if __name__ == "__main__":
    server = uvicorn.Server(server_config(floor_app(), "127.0.0.1", int(sys.argv[1])))
    new_loop().run_until_complete(server.serve())
