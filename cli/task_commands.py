"""``doraforge task …`` and ``doraforge tools …``: governed tasks and direct tool access."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from typing import Any

from doraforge.cli import tools_call, tools_describe
from doraforge.cli.context import Context
from doraforge.cli.output import local_time


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    task = commands.add_parser("task", help="governed AgentTasks")
    sub = task.add_subparsers(dest="task_command", required=True)
    run = sub.add_parser("run", help="run the scripted pick-and-place agent on a running skill")
    run.add_argument("skill")
    run.add_argument(
        "--out",
        type=Path,
        default=Path("out") / "task",
        help="reports folder: each task writes <out>/<task_id>/report.html and its frames",
    )
    run.set_defaults(handler=_run)
    sub.add_parser("list", help="recent tasks").set_defaults(handler=_list)
    for name, handler, text in (("get", _get, "one task in full"), ("cancel", _cancel, "cancel")):
        command = sub.add_parser(name, help=text)
        command.add_argument("task_id")
        command.set_defaults(handler=handler)
    tools = commands.add_parser("tools", help="the Tool API of a running skill or a Gateway")
    tsub = tools.add_subparsers(dest="tools_command", required=True)
    commands_here = []
    for name, handler, text in (
        ("list", _tools_list, "list tools"),
        ("context", _tools_context, "a tool's live context (its schema: tools describe)"),
        ("query", _tools_query, "run a diagnostic Query"),
    ):
        command = tsub.add_parser(name, help=text)
        if name != "list":
            command.add_argument("tool_id")
        if name == "query":
            command.add_argument("--args", default="{}", help="the Query arguments as JSON")
        command.set_defaults(handler=handler)
        commands_here.append(command)
    commands_here.append(tools_describe.register(tsub))
    commands_here.append(tools_call.register(tsub))
    for command in commands_here:
        where = command.add_mutually_exclusive_group(required=True)
        where.add_argument(
            "--skill", help="an installed skill (the Gateway its running instance listens on)"
        )
        where.add_argument(
            "--gateway", help="a Gateway URL (sent $DORAFORGE_GATEWAY_TOKEN[_FILE] when set)"
        )


def _with_service(ctx: Context, work: Any) -> Any:
    async def run() -> Any:
        service = ctx.service()
        try:
            return await work(service)
        finally:
            await service.aclose()
            service.store.close()

    return asyncio.run(run())


def _run(ctx: Context, args: argparse.Namespace) -> int:
    """Run the scripted agent; Ctrl-C or SIGTERM cancels and finalizes its task
    (:mod:`cli.task_interrupt`) and exits 130 / 143."""
    from doraforge.cli.demos.agent import refuse_if_solved, run_pick_place
    from doraforge.cli.report import verdict_lines, write_report
    from doraforge.cli.task_interrupt import Interrupted, lines, run_interruptible

    running = ctx.runtime().status(args.skill)

    async def work(service: Any) -> Any:
        if running is not None and running.live:  # else the task says it is not running
            await refuse_if_solved(service, args.skill, running.gateway_url)
        try:
            described = await run_interruptible(
                service,
                lambda opened: run_pick_place(service, args.skill, say=ctx.out.say, opened=opened),
                ctx.out.say,
            )
        except Interrupted as stopped:
            return stopped, _report_of(stopped.described, service, args.out)
        return described, write_report(described, service.workspace, args.out)

    described, report = _with_service(ctx, work)
    if isinstance(described, Interrupted):
        for line in lines(described, args.skill):
            ctx.out.say(line)
        if report is not None:
            ctx.out.say(f"report: {report}")
        return described.exit_code
    task = described["task"]
    for line in verdict_lines(described):
        ctx.out.say(line)
    ctx.out.say(f"task {task['task_id']}: {task['state']}")
    ctx.out.say(f"report: {report}")
    if ctx.out.as_json:
        ctx.out.data({"task": task, "report": str(report)})
    return 0 if task["state"] == "succeeded" else 1


def _report_of(described: dict[str, Any] | None, service: Any, out: Path) -> Path | None:
    """The report of an interrupted run's task (``None`` without one, or when it cannot
    be written: the line saying how the task ended matters more)."""
    from doraforge.cli.report import write_report

    if described is None:
        return None
    try:
        return write_report(described, service.workspace, out)
    except OSError:
        return None


def _list(ctx: Context, args: argparse.Namespace) -> int:
    from doraforge.paos.store import AgentTaskStore

    store = AgentTaskStore(ctx.home.store_path)
    tasks = [task.public() for task in store.tasks()]
    store.close()
    rows = [[t["task_id"], t["state"], local_time(t["created_at_ms"]), t["goal"]] for t in tasks]
    ctx.out.table(
        "tasks",
        ["task", "state", "created", "goal"],
        rows,
        tasks,
        whole=["task", "state", "created"],
    )
    return 0


def _get(ctx: Context, args: argparse.Namespace) -> int:
    async def work(service: Any) -> Any:
        return service.describe(args.task_id)

    ctx.out.data(_with_service(ctx, work))
    return 0


def _cancel(ctx: Context, args: argparse.Namespace) -> int:
    from doraforge.paos.finalize import cancel_task

    async def work(service: Any) -> Any:
        return await cancel_task(service, args.task_id, reason="operator_requested")

    described = _with_service(ctx, work)
    ctx.out.say(f"task {args.task_id}: {described['task']['state']}")
    return 0


def _gateway(ctx: Context, args: argparse.Namespace) -> str:
    if args.gateway:
        return str(args.gateway)
    from doraforge.skill_runtime import installed_manifest

    installed_manifest(ctx.home, args.skill)  # a name not installed fails, naming those that are
    # Where the running instance listens (`skill start --port` may have moved it); never
    # the manifest's default, where another skill's Gateway may answer.
    state = ctx.runtime().status(args.skill)
    if state is None or not state.live:
        from doraforge.skill_runtime.errors import RuntimeStateError

        now = "has never been started" if state is None else f"is {state.state}"
        raise RuntimeStateError(
            "SKILL_NOT_RUNNING",
            f"skill {args.skill!r} {now}; start it with `doraforge skill start {args.skill}`, "
            "or name a Gateway with --gateway URL",
        )
    return str(state.gateway_url)


def gateway_client(ctx: Context, args: argparse.Namespace, call: Any) -> Any:
    """Run ``call(client)`` with a ForgeToolClient on the ``--skill``/``--gateway`` of
    ``args``, presenting the token that Gateway takes."""
    from doraforge.paos.client import ForgeToolClient

    url = _gateway(ctx, args)
    # A running skill's Gateway gets that runtime's token, any other the operator's.
    token = ctx.gateway_tokens()(url)

    async def run() -> Any:
        async with ForgeToolClient(url, token=token) as client:
            return await call(client)

    return asyncio.run(run())


def _tools_list(ctx: Context, args: argparse.Namespace) -> int:
    listing = gateway_client(ctx, args, lambda client: client.list_tools())
    rows = [[t["tool_id"], t["semantics"], t["description"]] for t in listing["tools"]]
    # Ids are copied into the next command and descriptions read whole: neither is cut.
    columns = ["tool", "kind", "description"]
    ctx.out.table("tools", columns, rows, listing, whole=columns[:2], wrapped=columns[2:])
    return 0


def _tools_context(ctx: Context, args: argparse.Namespace) -> int:
    ctx.out.data(gateway_client(ctx, args, lambda client: client.context(args.tool_id)))
    return 0


def _tools_query(ctx: Context, args: argparse.Namespace) -> int:
    try:
        arguments = tools_call.parse_arguments(args.args)
    except tools_call.ArgumentsRefused as exc:
        ctx.out.fail(f"TOOLS_ARGS_INVALID: {exc}")
        return tools_call.EXIT_USAGE

    async def call(client: Any) -> Any:
        spec, _ = await client.tool_spec(args.tool_id)
        return await client.query(
            spec["endpoint_id"], spec["operation"], arguments, caller_id="doraforge-cli"
        )

    ctx.out.data(gateway_client(ctx, args, call))
    return 0
