"""An MCP client runs the pick-and-place through `doraforge serve` (see the README).

Start the sim skill and the registry first:

    doraforge skill pack skills/pick-place --output pick-place.tar.gz
    doraforge skill install pick-place.tar.gz --yes
    doraforge skill start pick-place --profile sim
    doraforge serve --mcp --grant robot.read --grant robot.write --approve forge.tool_start_action

then `.venv/bin/python examples/mcp_pick_place.py [URL]`. When the registry was started
with `--token-env DORAFORGE_REGISTRY_TOKEN`, export the same variable here: its value is
sent as the bearer token. The skill's Gateway token never leaves the registry's side.
"""

import asyncio
import os
import sys

import httpx
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from doraforge.cli.demos.pick_place import STEP_TIMEOUT_S, plan_steps

URL = sys.argv[1] if len(sys.argv) > 1 else "http://127.0.0.1:8765/mcp"
TOKEN = os.environ.get("DORAFORGE_REGISTRY_TOKEN")
HEADERS = {"Authorization": f"Bearer {TOKEN}"} if TOKEN else {}


async def call(session: ClientSession, name: str, **arguments: object) -> dict:
    result = await session.call_tool(name, arguments)
    if result.isError:
        raise RuntimeError(result.content)
    return result.structuredContent


async def main() -> None:
    async with (
        # The SDK's default timeouts (a response stream may stay open), the bearer on every request.
        httpx.AsyncClient(headers=HEADERS, timeout=httpx.Timeout(30, read=300)) as http,
        streamable_http_client(URL, http_client=http) as (read, write, _),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        task = (await call(session, "forge_task_create", skill="pick-place"))["task"]
        scene = await call(
            session, "forge_tool_query", task_id=task["task_id"], tool_id="world.scene_state"
        )
        for label, tool_id, arguments in plan_steps(scene["response"]["result"]["outputs"]):
            started = await call(
                session,
                "forge_tool_start_action",
                task_id=task["task_id"],
                tool_id=tool_id,
                arguments=arguments,
            )
            async with asyncio.timeout(STEP_TIMEOUT_S):
                while True:
                    answer = await call(
                        session,
                        "forge_tool_action_result",
                        task_id=task["task_id"],
                        record_id=started["record_id"],
                    )
                    if answer["status"] == "available":
                        print(label, answer["record"]["state"])
                        break
                    await asyncio.sleep(0.1)
        done = await call(session, "forge_task_finalize", task_id=task["task_id"])
        print(done["task"]["state"], done["revisions"][-1]["verdict"]["status"])


asyncio.run(main())
