"""``doraforge skill …``: pack, install, inspect and run skill bundles."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path
from typing import Any

from doraforge import skills
from doraforge.cli.context import Context


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
    install.set_defaults(handler=_install)
    sub.add_parser("list", help="installed skills").set_defaults(handler=_list)
    for name, handler, text in (
        ("inspect", _inspect, "manifest, archive manifest and artifact receipts"),
        ("remove", _remove, "remove an installed skill"),
        ("logs", _logs, "the runtime's logs"),
    ):
        command = sub.add_parser(name, help=text)
        command.add_argument("name")
        command.set_defaults(handler=handler)
    start = sub.add_parser("start", help="start the skill's runtime on Dora")
    start.add_argument("name")
    start.add_argument("--profile")
    start.set_defaults(handler=_start)
    stop = sub.add_parser("stop", help="stop the skill's runtime")
    stop.add_argument("name")
    stop.add_argument("--force", action="store_true", help="stop despite active work (audited)")
    stop.set_defaults(handler=_stop)
    status = sub.add_parser("status", help="runtime status of one or all skills")
    status.add_argument("name", nargs="?")
    status.set_defaults(handler=_status)


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
            return False  # nobody to ask: refuse rather than assume
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
    shipped = ", ".join(skills.names())
    raise FileNotFoundError(f"skill folder {spec} does not exist (shipped skills: {shipped})")


def _pack(ctx: Context, args: argparse.Namespace) -> int:
    from doraforge.skill_runtime.archive import pack

    directory = bundle_directory(args.directory)
    output = args.output or Path(f"{directory.resolve().name}.tar.gz").absolute()
    result = pack(directory, output)
    ctx.out.say(f"packed {len(result.files)} files into {result.path} ({result.size} bytes)")
    ctx.out.data({"path": str(result.path), "sha256": result.sha256, "size": result.size})
    return 0


def _install(ctx: Context, args: argparse.Namespace) -> int:
    from doraforge.skill_runtime.download import terminal_progress

    with terminal_progress(sys.stderr, label=f"downloading {args.source}") as progress:
        installer = _installer(ctx, args.yes, None if ctx.out.as_json else progress)
        result = installer.install(args.source, yes=args.yes, name=args.name, version=args.version)
    ctx.out.say(f"installed {result.name} {result.version} into {result.path}")
    ctx.out.data(_plain(result))
    return 0


def _list(ctx: Context, args: argparse.Namespace) -> int:
    installed = [_plain(skill) for skill in _installer(ctx).list()]
    rows = [[s.get("name"), s.get("version"), s.get("path")] for s in installed]
    ctx.out.table("installed skills", ["name", "version", "path"], rows, installed)
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

    with ctx.out.progress(f"starting {args.name}") as update:
        manager = RuntimeManager(ctx.home, progress=update)
        state = manager.start(args.name, args.profile)
    ctx.out.say(f"{args.name} is {state.state} (Gateway {state.gateway_url})")
    ctx.out.data(_plain(state))
    return 0


def _stop(ctx: Context, args: argparse.Namespace) -> int:
    state = ctx.runtime().stop(args.name, force=args.force)
    ctx.out.say(f"{args.name} is {state.state}")
    ctx.out.data(_plain(state))
    return 0


def _status(ctx: Context, args: argparse.Namespace) -> int:
    runtime = ctx.runtime()
    states = [runtime.status(args.name)] if args.name else runtime.running()
    found = [_plain(s) for s in states if s is not None]
    rows = [
        [s["name"], s["version"], s["profile"], s["state"], s.get("gateway_url")] for s in found
    ]
    ctx.out.table("skill runtimes", ["name", "version", "profile", "state", "gateway"], rows, found)
    return 0 if found or not args.name else 1


def _logs(ctx: Context, args: argparse.Namespace) -> int:
    print(ctx.runtime().logs(args.name))
    return 0
