"""The launcher every tier-1 and tier-2 tool server starts under: limits, a new session, exec.

``python -I -m doraforge.registry.sources.launcher --memory-mb M --cpu-s S --files F
--procs P [--env-names A,B] -- command [args...]`` sets the resource limits, keeps only the
named environment variables, makes itself a session leader (so the manager can kill the
server's whole process group), asks to die with its parent (a crashed registry leaves no
orphan) and replaces itself with the command (``os.execvpe``, environment as given), so the
exit status the manager sees is the server's own: a memory limit shows as ``MemoryError``
(exit 1) or ``SIGKILL``/``SIGSEGV``, the CPU limit as ``SIGXCPU`` (then ``SIGKILL`` a second
later).

Only the standard library is imported: inside the tier-2 sandbox this file is bound alone,
read-only, and run as a script, because doraforge's own tree is not visible there.
"""

from __future__ import annotations

import argparse
import os
import resource
import signal
import sys
from collections.abc import Sequence

MIB = 1024 * 1024
EXIT_BAD_USAGE = 2
EXIT_NOT_FOUND = 127
EXIT_NOT_EXECUTABLE = 126
# Seconds between the soft CPU limit (SIGXCPU, which a server could catch) and the hard one
# (SIGKILL, which it cannot).
CPU_GRACE_S = 1
PR_SET_PDEATHSIG = 1
EXIT_ORPHANED = 125


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="doraforge-launcher",
        description="Run a tool server under resource limits in its own session.",
    )
    parser.add_argument("--memory-mb", type=int, required=True, help="address space (MiB)")
    parser.add_argument("--cpu-s", type=int, required=True, help="CPU time (seconds)")
    parser.add_argument("--files", type=int, required=True, help="open file descriptors")
    parser.add_argument("--procs", type=int, required=True, help="processes of this user")
    parser.add_argument(
        "--env-names",
        default=None,
        help="comma-separated variables the command keeps (every other one is removed)",
    )
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- command [args...]")
    return parser


def _cap(value: int, hard: int) -> int:
    """A limit no higher than the current hard one (only root may raise a hard limit)."""
    return value if hard == resource.RLIM_INFINITY else min(value, hard)


def _limit(kind: int, soft: int, hard: int) -> None:
    _, current_hard = resource.getrlimit(kind)
    resource.setrlimit(kind, (_cap(soft, current_hard), _cap(hard, current_hard)))


def apply_limits(memory_mb: int, cpu_s: int, files: int, procs: int) -> None:
    """Set the four declared limits (soft and hard) and disable core dumps.

    RLIMIT_NPROC counts every process of the real user, and the kernel does not apply it to
    root; the other three hold for every user."""
    _limit(resource.RLIMIT_AS, memory_mb * MIB, memory_mb * MIB)
    _limit(resource.RLIMIT_CPU, cpu_s, cpu_s + CPU_GRACE_S)
    _limit(resource.RLIMIT_NOFILE, files, files)
    _limit(resource.RLIMIT_NPROC, procs, procs)
    # A server killed by a limit must not leave a core image of its memory in the workdir.
    _limit(resource.RLIMIT_CORE, 0, 0)


def new_session() -> None:
    """Lead a new session and process group (already the case under ``start_new_session``)."""
    if os.getsid(0) == os.getpid():
        return
    os.setsid()


def die_with_parent() -> None:
    """Ask the kernel to SIGKILL this process (and so the server it becomes: the setting
    survives exec) when its parent dies, so a crashed registry leaves no orphan servers.
    Linux only; elsewhere the manager's stop is the only reaper."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes  # only here: the call is Linux-specific

    parent = os.getppid()
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # the parent died before the request took effect
        os._exit(EXIT_ORPHANED)


def keep_only(names: str | None) -> None:
    """Remove every environment variable not named: the MCP SDK merges the parent's HOME,
    USER, SHELL, TERM and LOGNAME into a server's declared environment, and a tier's
    environment is exactly what it built. Names travel on the command line, never values."""
    if names is None:
        return
    kept = set(filter(None, names.split(",")))
    for name in [name for name in os.environ if name not in kept]:
        del os.environ[name]


def _fail(code: str, message: str, status: int) -> int:
    print(f"doraforge-launcher: {code}: {message}", file=sys.stderr, flush=True)
    return status


def main(argv: Sequence[str] | None = None) -> int:
    """Apply the limits and exec the command; returns only when that is impossible."""
    args = _parser().parse_args(argv)
    command = list(args.command)
    if command[:1] == ["--"]:
        command = command[1:]
    if not command:
        return _fail("LAUNCHER_NO_COMMAND", "give the server command after --", EXIT_BAD_USAGE)
    new_session()
    die_with_parent()
    keep_only(args.env_names)
    try:
        apply_limits(args.memory_mb, args.cpu_s, args.files, args.procs)
    except (ValueError, OSError) as exc:
        return _fail("LAUNCHER_LIMIT_REFUSED", f"cannot set the limits ({exc})", EXIT_BAD_USAGE)
    try:
        os.execvpe(command[0], command, os.environ)
    except FileNotFoundError:
        message = f"{command[0]!r} not found on PATH={os.environ.get('PATH', '')!r}"
        return _fail("LAUNCHER_COMMAND_NOT_FOUND", message, EXIT_NOT_FOUND)
    except OSError as exc:
        message = f"cannot run {command[0]!r} ({exc.strerror}); check its mode and interpreter"
        return _fail("LAUNCHER_COMMAND_NOT_EXECUTABLE", message, EXIT_NOT_EXECUTABLE)


if __name__ == "__main__":
    sys.exit(main())
