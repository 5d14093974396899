"""The launcher every tier-1 and tier-2 tool server starts under: limits, a new session, exec.

``python -I -m doraforge.registry.sources.launcher --memory-mb M --cpu-s S --files F
--procs P [--run-as UID:GID] [--reveal PATH ...] [--cwd DIR] [--env-names A,B] -- command
[args...]`` sets the resource limits, keeps only the named environment variables, makes
itself a session leader (so the manager can kill the server's whole process group), when it
starts as root drops to ``--run-as`` (a server never runs as root: RLIMIT_NPROC does not bind
root, and root reads every file), asks to die with its parent (a crashed registry leaves no
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
import stat
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
MAX_REVEAL_ROUNDS = 4
MS_NOSUID = 2
MS_NODEV = 4
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18


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
        "--run-as",
        default=None,
        help="uid:gid the command runs as when the launcher starts as root (never 0)",
    )
    parser.add_argument(
        "--reveal",
        action="append",
        default=[],
        help="a path the command needs that the run-as user cannot reach (tier 1, as root)",
    )
    parser.add_argument(
        "--cwd",
        default=None,
        help="directory to enter after the switch (tier 2: root without capabilities "
        "cannot enter a directory that belongs to the run-as user)",
    )
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


def parse_run_as(value: str) -> tuple[int, int]:
    """``uid:gid`` as two integers, neither 0 (a server never runs as root).

    Raises :class:`ValueError` naming what is wrong."""
    uid, sep, gid = value.partition(":")
    if not (sep and uid.isdigit() and gid.isdigit()):
        raise ValueError(f"run_as {value!r} must be numeric uid:gid, such as 65534:65534")
    if int(uid) == 0 or int(gid) == 0:
        raise ValueError(f"run_as {value!r} names root; a server never runs as uid or gid 0")
    return int(uid), int(gid)


def _searchable(path: str, uid: int, gid: int) -> bool:
    """Whether ``uid:gid`` (no supplementary groups) may traverse the directory ``path``."""
    st = os.stat(path)
    if st.st_uid == uid:
        return bool(st.st_mode & stat.S_IXUSR)
    if st.st_gid == gid:
        return bool(st.st_mode & stat.S_IXGRP)
    return bool(st.st_mode & stat.S_IXOTH)


def blocking_ancestor(path: str, uid: int, gid: int) -> str | None:
    """The topmost directory above ``path`` that ``uid:gid`` cannot traverse, if any."""
    parts = os.path.realpath(path).split(os.sep)[1:-1]
    current = os.sep
    for part in parts:
        if not _searchable(current, uid, gid):
            return current
        current = os.path.join(current, part)
    return None if _searchable(current, uid, gid) else current


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str) -> None:
    import ctypes  # only here: mount(2) is Linux-specific

    libc = ctypes.CDLL(None, use_errno=True)
    encoded = [None if v is None else v.encode() for v in (source, target, fstype, data)]
    if libc.mount(*encoded[:3], ctypes.c_ulong(flags), encoded[3]) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"mount {target}: {os.strerror(errno)}")


def reveal(paths: Sequence[str], uid: int, gid: int) -> None:
    """Make ``paths`` reachable for ``uid:gid`` in a private mount namespace (tier 1 as root):
    each topmost directory that blocks one (such as a 0700 /root holding the interpreter) is
    covered by an empty tmpfs into which only the needed paths are bound back, so the server
    reaches its interpreter and directories and nothing else under that directory."""
    pending = [os.path.realpath(p) for p in paths if os.path.exists(p)]
    unshared = False
    for _ in range(MAX_REVEAL_ROUNDS):
        blocked = {p: b for p in pending if (b := blocking_ancestor(p, uid, gid)) is not None}
        if not blocked:
            return
        if not unshared:  # mounts below stay in this process's own namespace
            _private_namespace(blocked)
            unshared = True
        tops = {b for b in blocked.values() if not any(_under(b, o) for o in blocked.values())}
        handles = {p: os.open(p, os.O_PATH) for p in blocked}
        try:
            for top in tops:
                _mount("tmpfs", top, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755")
            for path, handle in handles.items():
                _bind_back(handle, path)
        finally:
            for handle in handles.values():
                os.close(handle)
    raise OSError(f"cannot make {sorted(pending)} reachable for {uid}:{gid}")


def _private_namespace(blocked: dict[str, str]) -> None:
    """Enter a mount namespace of this process's own, or say which directory blocks what."""
    try:
        os.unshare(os.CLONE_NEWNS)
        _mount(None, "/", None, MS_REC | MS_PRIVATE, "")
    except OSError as exc:
        path, blocker = next(iter(blocked.items()))
        raise OSError(
            f"{path} is behind {blocker}, which run_as cannot enter, and no private mount "
            f"namespace is allowed here ({exc.strerror}): make {blocker} traversable "
            "(chmod o+x) or move the server's files or the registry home out of it"
        ) from exc


def _under(path: str, other: str) -> bool:
    return path != other and path.startswith(other.rstrip(os.sep) + os.sep)


def _bind_back(handle: int, path: str) -> None:
    """Bind the object ``handle`` opened (now hidden) back at ``path`` inside the tmpfs."""
    parent = os.path.dirname(path)
    if not os.path.isdir(parent):
        os.makedirs(parent, mode=0o755)
    if stat.S_ISDIR(os.fstat(handle).st_mode):
        os.makedirs(path, mode=0o755, exist_ok=True)
    elif not os.path.exists(path):
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o644))
    _mount(f"/proc/self/fd/{handle}", path, None, MS_BIND | MS_REC, "")


def drop_privileges(uid: int, gid: int) -> None:
    """Become ``uid:gid`` for good: supplementary groups, then gid, then uid (the order the
    kernel needs: a process that gave up its uid can no longer change its groups), then check
    that root cannot be regained. Raises :class:`OSError` if any step fails."""
    os.setgroups([])
    os.setgid(gid)
    os.setuid(uid)
    if os.getresuid() != (uid, uid, uid) or os.getresgid() != (gid, gid, gid) or os.getgroups():
        raise OSError(f"the process is not {uid}:{gid} with no groups after the switch")
    try:
        os.setuid(0)
    except PermissionError:
        return
    raise OSError("the process could regain uid 0 after dropping it")


def _switch_user(run_as: str | None, reveals: Sequence[str]) -> None:
    """As root, make the reveal paths reachable and drop to ``run_as``; as any other user
    (which cannot switch) nothing: the limits bind that user already."""
    if run_as is None or os.geteuid() != 0:
        return
    uid, gid = parse_run_as(run_as)
    if reveals:
        cwd = os.getcwd()
        reveal(reveals, uid, gid)
        os.chdir(cwd)  # the path may now be a bind of the same directory
    drop_privileges(uid, gid)


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
    keep_only(args.env_names)
    try:
        apply_limits(args.memory_mb, args.cpu_s, args.files, args.procs)
    except (ValueError, OSError) as exc:
        return _fail("LAUNCHER_LIMIT_REFUSED", f"cannot set the limits ({exc})", EXIT_BAD_USAGE)
    try:
        _switch_user(args.run_as, args.reveal)
    except (ValueError, OSError) as exc:
        message = f"cannot run as {args.run_as} ({exc}); fix limits.run_as or run the registry"
        return _fail("LAUNCHER_RUN_AS_FAILED", message + " as that user", EXIT_BAD_USAGE)
    die_with_parent()  # after the switch: changing credentials clears the death signal
    if args.cwd is not None:
        try:
            os.chdir(args.cwd)
        except OSError as exc:
            message = f"cannot enter {args.cwd!r} ({exc.strerror}); check its owner is run_as"
            return _fail("LAUNCHER_CWD_REFUSED", message, EXIT_BAD_USAGE)
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
