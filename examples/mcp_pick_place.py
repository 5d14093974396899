"""An MCP client runs the pick-and-place through `doraforge serve` (see the README).

Start the sim skill and the registry first:

    doraforge skill pack skills/pick-place --output pick-place.tar.gz
    doraforge skill install pick-place.tar.gz --yes
    doraforge skill start pick-place --profile sim
    doraforge serve --mcp --grant robot.read --grant robot.write --approve forge_tool_start_action

then `.venv/bin/python examples/mcp_pick_place.py [URL]`. A registry started with a token
(`--token-file PATH` or `--token-env VAR`) needs the same token here: pass the same
`--token-file PATH` (a 0600 file) or `--token-env VAR`; without either, the variable
DORAFORGE_REGISTRY_TOKEN is used when it is set. The token is sent as the bearer on every
request and never printed. The skill's Gateway token never leaves the registry's side.

It prints each motion's state, then the task's state and verdict (`succeeded success`), and
exits 0 when the task succeeded; anything else ends it in one line and exit status 1.
"""

import argparse
import asyncio
import os
import sys

import httpx
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import McpError
from mcp.types import TextContent

from doraforge.cli.demos.pick_place import STEP_TIMEOUT_S, plan_steps
from doraforge.wire.tokens import TokenError, load_token

DEFAULT_URL = "http://127.0.0.1:8765/mcp"
DEFAULT_TOKEN_ENV = "DORAFORGE_REGISTRY_TOKEN"


def arguments(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="pick and place through doraforge serve (MCP)")
    parser.add_argument("url", nargs="?", default=DEFAULT_URL, help=f"default {DEFAULT_URL}")
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--token-file", help="a 0600 file holding the registry's token")
    source.add_argument("--token-env", metavar="VAR", help="a variable holding the token")
    return parser.parse_args(argv)


def bearer(args: argparse.Namespace) -> dict[str, str]:
    """The Authorization header for the chosen token source (none when there is none)."""
    env = args.token_env
    if env is None and args.token_file is None and os.environ.get(DEFAULT_TOKEN_ENV):
        env = DEFAULT_TOKEN_ENV
    try:
        token = load_token(env=env, file=args.token_file, environ=os.environ)
    except TokenError as exc:
        sys.exit(f"mcp_pick_place: {exc}")
    return {"Authorization": f"Bearer {token}"} if token else {}


async def call(session: ClientSession, name: str, **arguments: object) -> dict:
    result = await session.call_tool(name, arguments)
    if result.isError:  # its first text block reads "CODE: message"
        first = result.content[0] if result.content else None
        raise RuntimeError(first.text if isinstance(first, TextContent) else f"{name} failed")
    if result.structuredContent is None:
        raise RuntimeError(f"{name} answered without structured content")
    return result.structuredContent


async def finished(session: ClientSession, task_id: str, record_id: str, label: str) -> str:
    """The state of the Action ``record_id`` once it is available (polled, bounded)."""
    try:
        async with asyncio.timeout(STEP_TIMEOUT_S):
            while True:
                answer = await call(
                    session, "forge_tool_action_result", task_id=task_id, record_id=record_id
                )
                if answer["status"] == "available":
                    return answer.get("record", {}).get("state", answer["status"])
                await asyncio.sleep(0.1)
    except TimeoutError:
        raise RuntimeError(f"{label} did not finish within {STEP_TIMEOUT_S:g} s") from None


async def main(url: str, headers: dict[str, str]) -> None:
    async with (
        # The SDK's default timeouts (a response stream may stay open), the bearer on every request.
        httpx.AsyncClient(headers=headers, timeout=httpx.Timeout(30, read=300)) as http,
        streamable_http_client(url, http_client=http) as (read, write, _),
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
                step=label,  # the report and the console caption its frames with it
            )
            print(label, await finished(session, task["task_id"], started["record_id"], label))
        done = await call(session, "forge_task_finalize", task_id=task["task_id"])
    # forge_task_finalize's output schema requires both, whatever the result budget cut.
    state, verdict = done["task"]["state"], done["revisions"][-1]["verdict"] or {}
    print(state, verdict.get("status", "unverified"))
    if state != "succeeded":
        raise RuntimeError(f"the task ended {state}")


def leaf_messages(group: BaseExceptionGroup[Exception]) -> list[str]:
    """The messages of the errors a (nested) exception group holds."""
    return [
        message
        for error in group.exceptions
        for message in (
            leaf_messages(error) if isinstance(error, BaseExceptionGroup) else [str(error)]
        )
    ]


if __name__ == "__main__":
    options = arguments(sys.argv[1:])
    try:
        asyncio.run(main(options.url, bearer(options)))
    except* (RuntimeError, McpError) as failed:  # the client's task groups wrap the error
        sys.exit(f"mcp_pick_place: {'; '.join(leaf_messages(failed))}")
    except* httpx.HTTPError as failed:
        sys.exit(f"mcp_pick_place: cannot reach {options.url}: {leaf_messages(failed)[0]}")
