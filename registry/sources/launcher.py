"""The launcher every tier-1 and tier-2 tool server starts under: limits, a new session, exec.

``python -I -m doraforge.registry.sources.launcher --memory-mb M --cpu-s S --files F
--procs P [--run-as UID:GID] [--reveal PATH ...] [--cwd DIR] [--env-names A,B] -- command
[args...]`` sets the resource limits, keeps only the named environment variables, makes
itself a session leader (so the manager can kill the server's whole process group) and a
child subreaper, and forks the server: the child drops to ``--run-as`` when the launcher
starts as root (a server never runs as root: RLIMIT_NPROC does not bind root, and root
reads every file), asks to die with the launcher and execs the command (environment as
given). The launcher stays as the server's supervisor: every process the server leaves
behind, ``setsid`` and double-forked or not, is re-parented to it, and when the server
exits, or the launcher is told to stop (SIGTERM, SIGINT, SIGHUP, or the registry's death),
it SIGKILLs everything below it before it exits, with the server's own exit status (a
signal that killed the server kills the launcher too): a memory limit shows as
``MemoryError`` (exit 1) or ``SIGKILL``/``SIGSEGV``, the CPU limit as ``SIGXCPU`` (then
``SIGKILL`` a second later). Run as root, the supervisor stays root, so a server (never
root) cannot signal it.

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
PR_SET_CHILD_SUBREAPER = 36
#: How a shell reports "killed by signal N": the launcher's exit when it cannot re-raise N.
SHELL_SIGNAL_BASE = 128
#: The signals that stop the supervisor (after it has ended everything below it).
STOP_SIGNALS = frozenset({signal.SIGTERM, signal.SIGINT, signal.SIGHUP})
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


def _prctl(option: int, value: int) -> None:
    import ctypes  # only here: the call is Linux-specific

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(option, value, 0, 0, 0) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"prctl({option}): {os.strerror(errno)}")


def die_with_parent(sig: int = signal.SIGKILL) -> None:
    """Ask the kernel to send ``sig`` to this process (the setting survives exec) when its
    parent dies: the server gets SIGKILL when its supervisor dies, the supervisor SIGTERM
    (it then ends everything below it) when the registry dies, so a crashed registry
    leaves no orphan. Linux only; elsewhere the manager's stop is the only reaper."""
    if not sys.platform.startswith("linux"):
        return
    parent = os.getppid()
    _prctl(PR_SET_PDEATHSIG, sig)
    if os.getppid() != parent:  # the parent died before the request took effect
        os._exit(EXIT_ORPHANED)


def become_subreaper() -> None:
    """Make every orphan below this process (a ``setsid`` double fork included) its child,
    never init's, so the supervisor can find and end it. Linux only."""
    if sys.platform.startswith("linux"):
        _prctl(PR_SET_CHILD_SUBREAPER, 1)


def _parents() -> dict[int, list[int]]:
    """Each live process's children, by parent pid, read from /proc."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat_file:
                fields = stat_file.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue  # it ended while we looked
        children.setdefault(int(fields[1]), []).append(int(entry))
    return children


def descendants(root: int) -> list[int]:
    """Every process below ``root``, parents before their children."""
    children = _parents()
    found: list[int] = []
    pending = list(children.get(root, []))
    while pending:
        pid = pending.pop()
        found.append(pid)
        pending += children.get(pid, [])
    return found


def end_descendants() -> None:
    """SIGKILL everything below this process, round after round, until it has no child
    left. A subreaper adopts each orphan, so no child means nothing below it survives;
    a process cannot fork once SIGKILL is pending, and each round reaps one child."""
    while True:
        for pid in descendants(os.getpid()):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                continue
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return


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


def _reveal_for(run_as: str | None, reveals: Sequence[str]) -> tuple[int, int] | None:
    """As root: the ``run_as`` ids, with the reveal paths made reachable for them (in this
    process's own mount namespace, which the server inherits); as any other user, which
    cannot switch, ``None``: the limits bind that user already."""
    if run_as is None or os.geteuid() != 0:
        return None
    uid, gid = parse_run_as(run_as)
    if reveals:
        cwd = os.getcwd()
        reveal(reveals, uid, gid)
        os.chdir(cwd)  # the path may now be a bind of the same directory
    return uid, gid


def _fail(code: str, message: str, status: int) -> int:
    print(f"doraforge-launcher: {code}: {message}", file=sys.stderr, flush=True)
    return status


class _Stop(Exception):
    """Raised in the supervisor by a stop signal."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _raise_stop(signum: int, _frame: object) -> None:
    raise _Stop(signum)


def _run_server(args: argparse.Namespace, command: list[str], ids: tuple[int, int] | None) -> int:
    """In the forked child: become ``run_as``, die with the supervisor, exec the command;
    returns (an exit status) only when one of them fails."""
    if ids is not None:
        try:
            drop_privileges(*ids)
        except OSError as exc:
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


def _fork_server(args: argparse.Namespace, command: list[str], ids: tuple[int, int] | None) -> int:
    """Fork the server with the stop signals blocked, so a stop in between reaches the
    supervisor's handler, never the child's copy of it; the child gets them back as
    defaults before it execs."""
    signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    for signum in STOP_SIGNALS:
        signal.signal(signum, _raise_stop)
    pid = os.fork()
    if pid == 0:
        status = EXIT_BAD_USAGE
        try:
            for signum in STOP_SIGNALS:
                signal.signal(signum, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
            status = _run_server(args, command, ids)
        finally:
            os._exit(status)
    # The supervisor keeps none of the server's stdio: its end of a pipe would hold the
    # manager's read open after the server closed it.
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.close(null)
    return pid


def supervise(child: int) -> int:
    """Wait for the server ``child`` (reaping adopted orphans meanwhile) or a stop signal,
    then end everything below this process; the wait status to end with."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
    try:
        while True:
            pid, status = os.waitpid(-1, 0)
            if pid == child:
                return status
    except _Stop as stop:
        return stop.signum  # a wait status for "killed by signum"
    finally:
        signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
        end_descendants()


def end_like(status: int) -> int:
    """Exit as the server did: its exit code, or killed by the same signal."""
    code = os.waitstatus_to_exitcode(status)
    if code >= 0:
        return code
    signum = -code
    signal.signal(signum, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signum})
    os.kill(os.getpid(), signum)
    return SHELL_SIGNAL_BASE + signum  # only when the signal does not end a process


def main(argv: Sequence[str] | None = None) -> int:
    """Apply the limits, fork the command and supervise it; the server's exit status."""
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
        become_subreaper()
    except OSError as exc:
        return _fail("LAUNCHER_SUBREAPER_REFUSED", f"cannot supervise ({exc})", EXIT_BAD_USAGE)
    try:
        ids = _reveal_for(args.run_as, args.reveal)
    except (ValueError, OSError) as exc:
        message = f"cannot run as {args.run_as} ({exc}); fix limits.run_as or run the registry"
        return _fail("LAUNCHER_RUN_AS_FAILED", message + " as that user", EXIT_BAD_USAGE)
    die_with_parent(signal.SIGTERM)  # the supervisor ends the tree when the registry dies
    return end_like(supervise(_fork_server(args, command, ids)))


if __name__ == "__main__":
    sys.exit(main())
