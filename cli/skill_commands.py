"""``doraforge skill …``: pack, install, inspect and run skill bundles."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import subprocess
import sys
from pathlib import Path
from typing import Any

from doraforge import skills
from doraforge.cli.argtypes import coordinator_address, tcp_port
from doraforge.cli.context import Context
from doraforge.cli.output import local_time
from doraforge.skill_runtime.dora_run import redeliver, stop_signals_held
from doraforge.skill_runtime.errors import RuntimeStateError

#: A home-level default for ``skill start --coordinator HOST:PORT``.
COORDINATOR_ENV = "DORAFORGE_COORDINATOR"


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    skill = commands.add_parser("skill", help="pack, install and run skill bundles")
    sub = skill.add_subparsers(dest="skill_command", required=True)
    pack = sub.add_parser("pack", help="write a deterministic bundle archive")
    pack.add_argument(
        "directory",
        help=f"a bundle folder, or a shipped example skill: {', '.join(skills.names())}",
    )
    pack.add_argument("--output", type=Path, help="the archive (default ./<folder>.tar.gz)")
    pack.set_defaults(handler=_pack)
    install = sub.add_parser("install", help="install from a file, a package index or a registry")
    install.add_argument("source")
    install.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    install.add_argument("--name")
    install.add_argument("--version")
    install.add_argument(
        "--allow-external-commands",
        action="store_true",
        help="install even when a node runs a command from outside the bundle and the "
        "runtime's environment (such as /bin/bash); it runs as your user",
    )
    install.set_defaults(handler=_install)
    sub.add_parser("list", help="installed skills").set_defaults(handler=_list)
    for name, handler, text in (
        ("inspect", _inspect, "manifest, archive manifest and artifact receipts"),
        ("remove", _remove, "remove an installed skill"),
    ):
        command = sub.add_parser(name, help=text)
        command.add_argument("name")
        command.set_defaults(handler=handler)
    _register_logs(sub)
    start = sub.add_parser(
        "start",
        help="start the skill's runtime on Dora",
        description="Start the skill on this home's own Dora coordinator (one local daemon per "
        "machine id its dataflow names in deploy: {machine: ID}), or with --coordinator on an "
        f"existing one whose daemons run elsewhere (default ${COORDINATOR_ENV} when set).",
    )
    start.add_argument("name")
    start.add_argument("--profile")
    start.add_argument(
        "--port",
        type=_gateway_port,
        default=None,
        help="the skill's Gateway port, or auto for a free one (default: the one in its "
        "manifest's gateway_url); the state records the URL",
    )
    start.add_argument(
        "--coordinator",
        type=coordinator_address,
        default=None,
        metavar="HOST:PORT",
        help="run on this existing Dora coordinator (its daemons started by someone else); "
        "skill stop then stops only the skill's dataflow there",
    )
    start.add_argument(
        "--sandbox",
        action="store_true",
        help="run every node in bubblewrap: the host read-only, this home hidden but for "
        "the skill's own files, no capabilities (network and PIDs stay shared: Dora needs them)",
    )
    start.set_defaults(handler=_start)
    stop = sub.add_parser("stop", help="stop the skill's runtime")
    stop.add_argument("name")
    stop.add_argument("--force", action="store_true", help="stop despite active work (audited)")
    stop.set_defaults(handler=_stop)
    status = sub.add_parser(
        "status", help="runtime state of one skill or of every started one, with the reason"
    )
    status.add_argument("name", nargs="?")
    status.set_defaults(handler=_status)


def _register_logs(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    logs = sub.add_parser(
        "logs",
        help="the nodes' logs and the runtime's own log",
        description="The skill's node logs (Dora's own diagnostics hidden unless --all) and "
        "its runtime log. --follow streams new node lines until Ctrl-C.",
    )
    logs.add_argument("name")
    logs.add_argument("--node", help="only this node's lines (a node id of the dataflow)")
    logs.add_argument("--lines", type=_positive, default=100, help="last K lines (default 100)")
    logs.add_argument("--follow", "-f", action="store_true", help="then stream new lines")
    logs.add_argument("--all", action="store_true", help="keep Dora's own diagnostics")
    logs.set_defaults(handler=_logs)


def _gateway_port(text: str) -> int:
    """``auto`` (:data:`~doraforge.skill_runtime.runtime.AUTO_PORT`) or a TCP port."""
    from doraforge.skill_runtime.runtime import AUTO_PORT

    return AUTO_PORT if text == "auto" else tcp_port(text)


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text} is not a positive number of lines")
    return value


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {k: _plain(v) for k, v in dataclasses.asdict(value).items()}
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _installer(ctx: Context, yes: bool = False, progress: Any = None) -> Any:
    from rich.prompt import Confirm

    from doraforge.paos.store import AgentTaskStore
    from doraforge.skill_runtime.installer import Installer

    def confirm(question: str) -> bool:
        if yes:
            return True
        if not sys.stdin.isatty():
            # Nobody to ask: refuse rather than assume, having shown what --yes would run.
            if listing := question.rpartition("\n")[0]:
                ctx.out.say(listing)
            return False
        return Confirm.ask(question)

    runtime = ctx.runtime()

    def state(name: str) -> str | None:
        current = runtime.status(name)
        return None if current is None else current.state

    return Installer(
        ctx.home,
        confirm=confirm,
        store=AgentTaskStore(ctx.home.store_path),
        runtime_state=state,
        progress=progress,
    )


def bundle_directory(spec: str) -> Path:
    """The bundle folder ``spec`` names: an existing folder, else a shipped example skill
    (``pick-place``). Raises :class:`FileNotFoundError` naming the shipped skills."""
    given = Path(spec)
    if given.is_dir():
        return given
    if spec in skills.names():
        return skills.source(spec)
    from doraforge.wire.suggest import did_you_mean

    shipped = ", ".join(skills.names())
    raise FileNotFoundError(
        f"skill folder {spec} does not exist{did_you_mean(spec, skills.names())}; give a "
        f"bundle folder or a shipped skill by name (shipped skills: {shipped})"
    )


def _pack(ctx: Context, args: argparse.Namespace) -> int:
    from doraforge.skill_runtime.archive import pack

    directory = bundle_directory(args.directory)
    output = args.output or Path(f"{directory.resolve().name}.tar.gz").absolute()
    result = pack(directory, output)
    ctx.out.say(f"packed {len(result.files)} files into {result.path}")
    ctx.out.say(f"size {result.size} bytes · sha256 {result.sha256}")
    ctx.out.say(f"install it with: doraforge skill install {result.path}")
    if ctx.out.as_json:
        ctx.out.data({"path": str(result.path), "sha256": result.sha256, "size": result.size})
    return 0


def _install(ctx: Context, args: argparse.Namespace) -> int:
    from doraforge.skill_runtime.download import local_path, terminal_progress

    # A local file is copied, not downloaded: no bar, and nothing says "downloading" it.
    shown = not ctx.out.as_json and local_path(args.source) is None
    with contextlib.ExitStack() as stack:
        label = f"downloading {args.source}"
        progress = (
            stack.enter_context(terminal_progress(sys.stderr, label=label)) if shown else None
        )
        installer = _installer(ctx, args.yes, progress)
        result = installer.install(
            args.source,
            yes=args.yes,
            name=args.name,
            version=args.version,
            allow_external_commands=args.allow_external_commands,
        )
    ctx.out.say(f"installed {result.name} {result.version} into {result.path}")
    if lines := result.code.lines():
        ctx.out.say("`skill start` runs, as your user:")
        for line in lines:
            ctx.out.say(f"  {line}")
    if ctx.out.as_json:
        ctx.out.data(_plain(result))
    return 0


def _list(ctx: Context, args: argparse.Namespace) -> int:
    from doraforge.skill_runtime import installed_skills

    # gateway: where a running skill's Gateway listens now (its runtime state), else null.
    running = {skill.name: skill.running_gateway_url for skill in installed_skills(ctx.home)}
    installed = [
        {**_plain(skill), "gateway_url": running.get(skill.name)}
        for skill in _installer(ctx).list()
    ]
    rows = [[s["name"], s["version"], s["gateway_url"], s["path"]] for s in installed]
    ctx.out.table("installed skills", ["name", "version", "gateway", "path"], rows, installed)
    return 0


def _inspect(ctx: Context, args: argparse.Namespace) -> int:
    ctx.out.data(_plain(_installer(ctx).inspect(args.name)))
    return 0


def _remove(ctx: Context, args: argparse.Namespace) -> int:
    _installer(ctx).remove(args.name)
    ctx.out.say(f"removed {args.name}")
    return 0


def _start(ctx: Context, args: argparse.Namespace) -> int:
    from doraforge.skill_runtime.runtime import RuntimeManager

    coordinator = args.coordinator or _coordinator_setting(ctx)
    with ctx.out.progress(f"starting {args.name}") as update:
        manager = RuntimeManager(ctx.home, progress=update)
        state = manager.start(
            args.name,
            args.profile,
            port=args.port,
            coordinator=coordinator,
            sandbox=args.sandbox,
        )
    ctx.out.say(f"{args.name} is {state.state} (Gateway {state.gateway_url})")
    if placement := _placement(state.model_dump(mode="json")):
        ctx.out.say(f"{args.name} {placement}")
    if ctx.out.as_json:
        ctx.out.data(_plain(state))
    return 0


def _coordinator_setting(ctx: Context) -> Any:
    """``$DORAFORGE_COORDINATOR`` as the default ``--coordinator`` (read at the entry point)."""
    text = ctx.environ.get(COORDINATOR_ENV, "").strip()
    if not text:
        return None
    try:
        return coordinator_address(text)
    except argparse.ArgumentTypeError as exc:
        raise RuntimeStateError(
            "SKILL_COORDINATOR_INVALID", f"${COORDINATOR_ENV}: {exc}; unset it or fix it"
        ) from exc


def _placement(state: dict[str, Any]) -> str:
    """Where a runtime runs, for a skill on machines or on an attached coordinator ("" for
    one on this home's own single daemon, as always)."""
    machines = ", ".join(state.get("machines") or {})
    attached = state.get("coordinator_attached")
    if not machines and not attached:
        return ""
    where = f"coordinator {state.get('coordinator_host')}:{state.get('coordinator_port')}"
    where += " (attached: its own daemons)" if attached else " (this home's, local daemons)"
    return f"runs on machines {machines} of {where}" if machines else f"runs on {where}"


def _stop(ctx: Context, args: argparse.Namespace) -> int:
    state = ctx.runtime().stop(args.name, force=args.force)
    ctx.out.say(f"{args.name} is {state.state}")
    if ctx.out.as_json:
        ctx.out.data(_plain(state))
    return 0


def _status(ctx: Context, args: argparse.Namespace) -> int:
    from doraforge.skill_runtime.runtime_state import LIVE_STATES, all_states

    runtime = ctx.runtime()
    if args.name:
        found = [_named_status(ctx, args.name)]
    else:  # every skill ever started here, so a failed one shows with its reason
        checked = (runtime.status(s.name) for s in all_states(runtime.runtime_dir))
        found = [_plain(s) for s in checked if s is not None]
        if not found and not ctx.out.as_json:
            ctx.out.say(
                "no skill has been started in this home; `doraforge skill list` shows the "
                "installed ones, `doraforge skill start NAME --profile P` starts one"
            )
            return 0
    rows = [
        [
            s["name"],
            s["version"],
            s["profile"],
            s["state"],
            local_time(s.get("updated_at")),
            s.get("gateway_url"),
        ]
        for s in found
    ]
    columns = ["name", "version", "profile", "state", "since", "gateway"]
    # Every column is something an operator copies into the next command (a profile into
    # --profile, a URL into --gateway): none is cut.
    ctx.out.table("skill runtimes", columns, rows, found, whole=columns)
    # A reason is a sentence: on its own line it is read whole, not squeezed into a column.
    for state in found:
        if state.get("state") in LIVE_STATES and (placement := _placement(state)):
            ctx.out.say(f"{state['name']} {placement}")
        if state.get("error"):
            ctx.out.say(f"{state['name']} {state['state']}: {_reason(state['error'])}")
    return 0


def _named_status(ctx: Context, name: str) -> dict[str, Any]:
    """``name``'s checked runtime state; an installed skill never started is shown as such,
    and a name that is not installed fails (``SKILL_NOT_INSTALLED``, naming those that are)."""
    from doraforge.skill_runtime.catalog import installed_manifest

    state = ctx.runtime().status(name)
    if state is not None:
        return dict(_plain(state))
    manifest = installed_manifest(ctx.home, name)
    return {
        "name": name,
        "version": manifest.version,
        "profile": None,
        "state": "never started",
        "updated_at": None,
        "gateway_url": None,
        "error": None,
    }


def _reason(error: dict[str, Any] | None) -> str:
    return "" if not error else f"{error['code']}: {error['message']}"


def _logs(ctx: Context, args: argparse.Namespace) -> int:
    from doraforge.skill_runtime.catalog import installed_manifest

    runtime = ctx.runtime()
    if runtime.status(args.name) is None:
        installed_manifest(ctx.home, args.name)  # a name not installed fails, naming those that are
        raise RuntimeStateError(
            "SKILL_NOT_RUNNING",
            f"skill {args.name!r} has never been started, so it has no logs yet; start it "
            f"with `doraforge skill start {args.name}`",
        )
    text = runtime.logs(args.name, args.lines, node=args.node, keep_dora=args.all)
    if not args.follow:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
        return 0
    return _follow(
        lambda: runtime.follow_logs(args.name, node=args.node), keep_dora=args.all, first=text
    )


def _follow(start: Any, *, keep_dora: bool, first: str = "") -> int:
    """Start following (``start()`` returns the ``dora logs --follow`` process) and print
    its lines as they come until Dora stops or Ctrl-C, which exits 0: the operator asked
    to stop watching, nothing failed. Ctrl-C while it starts is handled the same way."""
    from doraforge.skill_runtime.node_logs import select

    process = None
    try:
        # ``first`` (the recent lines) is written inside, so Ctrl-C right after it is
        # handled here too.
        sys.stdout.write(first if not first or first.endswith("\n") else first + "\n")
        sys.stdout.flush()
        process = _spawn_held(start)
        for raw in process.stdout:
            for line in select([raw], keep_dora=keep_dora)[0]:
                print(line, flush=True)
    except KeyboardInterrupt:
        pass
    finally:
        if process is not None:
            _end(process)
    return 0


def _spawn_held(start: Any) -> Any:
    """``start()`` with Ctrl-C and SIGTERM held until it returns the follower: a signal
    mid-spawn would leave the follower unowned. A held signal is handed to the command's
    handler once it is owned (it raises: the follower is ended first)."""
    with stop_signals_held() as held:
        process = start()
    redeliver(held, lambda: _end(process))
    return process


def _end(process: Any) -> None:
    process.terminate()
    try:
        process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
