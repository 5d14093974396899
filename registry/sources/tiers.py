"""Execution tiers for stdio tool servers: how a third-party MCP server's process is started.

A tier turns a :class:`LaunchSpec` (what the operator declared) into a :class:`Launch` (what
``mcp.StdioServerParameters`` takes); the MCP-source manager spawns it, and adding a tier is
one more adapter here, nothing else changes.

* Tier 1, :class:`SubprocessTier`: the server runs under :mod:`.launcher` (resource limits,
  a new session, a subreaper supervisor that ends every process the server leaves behind)
  with a clean environment and its working directory as cwd.
* Tier 2, :class:`SandboxTier`: the same launcher inside bubblewrap: a read-only view of the
  system and the interpreter, the workdir read-only, only the scratch directory writable,
  every namespace unshared, all capabilities dropped, and no network unless the egress policy
  allows at least one declared host (then the host's network is shared: bwrap cannot filter
  by host, so the registry's egress policy is the control).

A server never runs as root: when the registry is root, both tiers run it as
``Limits.run_as`` (default nobody, ``65534:65534``), its workdir and scratch owned by that
user; a registry that is not root cannot switch, and its servers keep its uid.

Errors: :class:`TierUnavailable` (the tier cannot run here; the message says how to fix it)
and :class:`InvalidLaunch` (the declaration asks for something a tier refuses).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Literal, Protocol

from doraforge.registry.errors import Conflict, InvalidRequest
from doraforge.registry.sources.launcher import parse_run_as

NAME_PATTERN = r"[a-z0-9_-]{1,40}"
RESERVED_ENV_PREFIX = "DORAFORGE_"
ENV_NAME_PATTERN = r"[A-Za-z_][A-Za-z0-9_]*"
SYSTEM_PATH = ("/usr/local/bin", "/usr/bin", "/bin")
# Where the launcher script appears inside the sandbox (bound alone, read-only).
SANDBOX_LAUNCHER = "/run/doraforge/launcher.py"
# The launcher runs as a script by path in both tiers (``python -m
# doraforge.registry.sources.launcher`` is equivalent): ``-m`` would first import this
# package and the MCP SDK with it, 0.6 s on every start, for a launcher that needs neither.
LAUNCHER_FILE = Path(__file__).resolve().with_name("launcher.py")
PROBE_TIMEOUT_S = 10.0
MIB = 1024 * 1024
# nobody:nogroup on Debian: who a server runs as when the registry runs as root.
NOBODY = "65534:65534"


class TierUnavailable(Conflict):
    """The tier cannot run on this machine (bubblewrap missing, namespaces refused)."""

    retryable_default = False


class InvalidLaunch(InvalidRequest):
    """The server's declaration asks for something the tier refuses (a reserved variable)."""


@dataclass(frozen=True)
class Limits:
    """Per-server resource limits, all enforced by the launcher (soft = hard).

    ``memory_mb`` is address space (RLIMIT_AS: runtimes that reserve large virtual ranges,
    such as node, need more than their resident size), ``cpu_s`` CPU seconds (SIGXCPU, then
    SIGKILL a second later), ``open_files`` descriptors, ``processes`` the real user's process
    count (RLIMIT_NPROC; the kernel does not apply it to root, hence ``run_as``).

    ``run_as`` (numeric ``uid:gid``, never 0) is who the server runs as when the registry runs
    as root, in both tiers: a server never runs as root. A registry running as another user
    cannot switch, so its servers keep its uid (and the process limit binds that user)."""

    memory_mb: int = 512
    cpu_s: int = 60
    open_files: int = 256
    processes: int = 64
    run_as: str = NOBODY

    def __post_init__(self) -> None:
        for name in ("memory_mb", "cpu_s", "open_files", "processes"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"limits.{name} must be a positive integer, got {value!r}")
        if not isinstance(self.run_as, str):
            raise ValueError(f"limits.run_as must be a 'uid:gid' string, got {self.run_as!r}")
        try:
            parse_run_as(self.run_as)
        except ValueError as exc:
            raise ValueError(f"limits.{exc}") from None

    def ids(self) -> tuple[int, int]:
        """``run_as`` as (uid, gid)."""
        return parse_run_as(self.run_as)

    def launcher_args(self) -> list[str]:
        """The launcher's command-line options for these limits."""
        return [
            f"--memory-mb={self.memory_mb}",
            f"--cpu-s={self.cpu_s}",
            f"--files={self.open_files}",
            f"--procs={self.processes}",
            f"--run-as={self.run_as}",
        ]


@dataclass(frozen=True)
class LaunchSpec:
    """One declared server, with credentials already resolved into ``env`` by name.

    ``env`` holds only what was declared; ``workdir`` and ``scratch`` are created by the tier
    (:meth:`under` derives them from the sources home)."""

    name: str
    command: str
    args: tuple[str, ...]
    env: Mapping[str, str]
    workdir: Path
    scratch: Path
    limits: Limits = field(default_factory=Limits)
    egress_hosts: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not re.fullmatch(NAME_PATTERN, self.name):
            raise ValueError(f"server name {self.name!r} must match {NAME_PATTERN}")
        if not self.command:
            raise ValueError(f"server {self.name!r}: command must not be empty")
        object.__setattr__(self, "args", tuple(self.args))
        object.__setattr__(self, "env", MappingProxyType(dict(self.env)))
        object.__setattr__(self, "egress_hosts", tuple(self.egress_hosts))

    @classmethod
    def under(
        cls,
        sources_dir: Path,
        name: str,
        command: str,
        args: tuple[str, ...] = (),
        env: Mapping[str, str] | None = None,
        limits: Limits | None = None,
        egress_hosts: tuple[str, ...] = (),
    ) -> LaunchSpec:
        """A spec whose directories are ``<sources_dir>/<name>/work`` and ``…/scratch``."""
        home = sources_dir / name
        return cls(
            name=name,
            command=command,
            args=args,
            env=env or {},
            workdir=home / "work",
            scratch=home / "scratch",
            limits=limits or Limits(),
            egress_hosts=egress_hosts,
        )


@dataclass(frozen=True)
class Launch:
    """What ``mcp.StdioServerParameters(command=, args=, env=, cwd=)`` takes."""

    command: str
    args: list[str]
    env: dict[str, str]
    cwd: Path


class Tier(Protocol):
    """An execution tier: ``launch`` builds the process, ``available`` says if it can run."""

    name: Literal["subprocess", "sandbox"]

    def launch(self, spec: LaunchSpec) -> Launch:
        """The process to spawn for ``spec``; creates its directories.

        Raises :class:`TierUnavailable` or :class:`InvalidLaunch`."""
        ...

    def available(self) -> str | None:
        """``None`` when the tier can run here, else a one-line reason saying what to do."""
        ...


def clean_env(spec: LaunchSpec, *, home: Path, tmpdir: Path) -> dict[str, str]:
    """The server's whole environment: a minimal PATH, a UTF-8 locale, HOME and TMPDIR, and
    the declared variables. Nothing is inherited from the registry (tokens, DORAFORGE_*).

    Raises :class:`InvalidLaunch` when a declared variable uses the reserved prefix."""
    malformed = sorted(key for key in spec.env if not re.fullmatch(ENV_NAME_PATTERN, key))
    if malformed:
        raise InvalidLaunch(
            "MCP_SERVER_ENV_NAME",
            f"server {spec.name!r} declares variables that are not names ({', '.join(malformed)})"
            f": use {ENV_NAME_PATTERN}",
            details={"server": spec.name, "variables": malformed},
        )
    reserved = sorted(key for key in spec.env if key.upper().startswith(RESERVED_ENV_PREFIX))
    if reserved:
        raise InvalidLaunch(
            "MCP_SERVER_ENV_RESERVED",
            f"server {spec.name!r} declares {', '.join(reserved)}: {RESERVED_ENV_PREFIX}* "
            "variables are the registry's own; rename them in the server's env",
            details={"server": spec.name, "variables": reserved},
        )
    env = {
        "PATH": os.pathsep.join((str(Path(sys.executable).parent), *SYSTEM_PATH)),
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "HOME": str(home),
        "TMPDIR": str(tmpdir),
    }
    env.update(spec.env)
    return env


def runs_as_root() -> bool:
    """Whether the registry is root, so the launcher switches its servers to ``run_as``."""
    return os.geteuid() == 0


def prepare_dirs(spec: LaunchSpec) -> None:
    """Create the workdir and scratch directory (owner-only) if they are missing; as root,
    hand them to ``run_as`` so the server, which will not be root, can still use them."""
    for directory in (spec.workdir, spec.scratch):
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        if runs_as_root():
            os.chown(directory, *spec.limits.ids())


def launcher_argv(
    spec: LaunchSpec,
    env: Mapping[str, str],
    launcher_script: str | None = None,
    reveals: list[str] | None = None,
    cwd: str | None = None,
) -> list[str]:
    """Interpreter arguments that run the launcher then ``spec.command``, keeping only the
    names of ``env`` (whatever a spawner merges in is dropped before the command runs).

    ``-I`` keeps the workdir off ``sys.path`` (a server's files cannot shadow the launcher)
    and ignores PYTHON* variables."""
    entry = str(LAUNCHER_FILE) if launcher_script is None else launcher_script
    names = f"--env-names={','.join(sorted(env))}"
    shown = [f"--reveal={path}" for path in reveals or []]
    shown += [] if cwd is None else [f"--cwd={cwd}"]
    limits = spec.limits.launcher_args()
    return ["-I", entry, *limits, *shown, names, "--", spec.command, *spec.args]


def needed_paths(spec: LaunchSpec, path: str) -> list[str]:
    """What the server reads or writes by path: the interpreter, the command's venv, the
    declared files and its directories (tier 1 as root reveals these to ``run_as``)."""
    roots = [*interpreter_roots(), *declared_venv(spec, path), *declared_files(spec, path)]
    return list(dict.fromkeys([*roots, str(spec.workdir), str(spec.scratch)]))


class SubprocessTier:
    """Tier 1: a plain child process under the launcher, in the server's workdir."""

    name: Literal["subprocess", "sandbox"] = "subprocess"

    def available(self) -> str | None:
        """Always available where the registry runs (a POSIX system with ``resource``)."""
        return None

    def launch(self, spec: LaunchSpec) -> Launch:
        """The launcher under this interpreter; HOME is the workdir, TMPDIR the scratch.

        As root the launcher also makes the needed paths reachable for ``run_as`` (an
        interpreter under a 0700 /root, say) before it drops to that user."""
        prepare_dirs(spec)
        env = clean_env(spec, home=spec.workdir, tmpdir=spec.scratch)
        reveals = needed_paths(spec, env["PATH"]) if runs_as_root() else None
        return Launch(sys.executable, launcher_argv(spec, env, reveals=reveals), env, spec.workdir)


# The parts of /etc a runtime needs (loader, users, name resolution, TLS roots, time zone,
# alternatives); the rest (shadow files, ssh keys, service configs) stays out of the sandbox.
ETC_ENTRIES = (
    "alternatives",
    "ca-certificates",
    "ca-certificates.conf",
    "debian_version",
    "gai.conf",
    "group",
    "host.conf",
    "hostname",
    "hosts",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "localtime",
    "mime.types",
    "nsswitch.conf",
    "os-release",
    "passwd",
    "protocols",
    "resolv.conf",
    "services",
    "ssl",
    "timezone",
)
SYSTEM_ROOTS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")


def _mirror(path: str) -> list[str]:
    """Make ``path`` appear in the sandbox as on the host: a symlink as the same symlink
    (tzlocal reads /etc/localtime's target), anything else as a read-only bind."""
    if os.path.islink(path):
        return ["--symlink", os.readlink(path), path]
    return ["--ro-bind-try", path, path] if os.path.exists(path) else []


def interpreter_roots() -> list[str]:
    """The venv and the base interpreter this registry runs on (the launcher needs them,
    and Python servers installed in the venv do too), outside the system roots."""
    prefixes = (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix)
    return list(dict.fromkeys(prefixes))


def declared_venv(spec: LaunchSpec, path: str) -> list[str]:
    """The virtual environment the declared command lives in (``<venv>/bin/<command>`` next
    to a ``pyvenv.cfg``) and that venv's base interpreter: a server installed in a venv of
    its own runs in the sandbox."""
    found = shutil.which(spec.command, path=path) or spec.command
    root = Path(found).parent.parent
    config = root / "pyvenv.cfg"
    if not (os.path.isabs(found) and config.is_file()):
        return []
    roots = [str(root)]
    for line in config.read_text(encoding="utf-8", errors="replace").splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "home" and value.strip():
            roots.append(os.path.realpath(Path(value.strip()).parent))
    return roots


def declared_files(spec: LaunchSpec, path: str) -> list[str]:
    """The command and any absolute file arguments, as the operator declared them: each is
    made visible read-only (files only, never their directory), so ``python /srv/server.py``
    runs without exposing the rest of /srv."""
    candidates = [shutil.which(spec.command, path=path) or spec.command, *spec.args]
    return [c for c in candidates if os.path.isabs(c) and os.path.isfile(c)]


def _covered(path: str, roots: list[str]) -> bool:
    return any(Path(os.path.realpath(path)).is_relative_to(root) for root in roots)


def readonly_binds(spec: LaunchSpec, path: str) -> list[str]:
    """``--ro-bind`` options for the interpreter, the command's venv and declared files,
    each skipped when a broader bind (or the system roots) already shows it."""
    options: list[str] = []
    visible = [*SYSTEM_ROOTS]
    declared = [*interpreter_roots(), *declared_venv(spec, path)]
    for extra in [*declared, *declared_files(spec, path)]:
        if not _covered(extra, [*visible, str(spec.workdir), str(spec.scratch)]):
            # Source resolved, destination as declared: the command is run by that name.
            options += ["--ro-bind", os.path.realpath(extra), extra]
            visible.append(os.path.realpath(extra))
    return options


# As root, bwrap's own user namespace would map the sandbox's uid to host root (the process
# limit would not bind, root's files would be the server's own): the sandbox gets every other
# namespace and keeps only the two capabilities the launcher needs to drop to ``run_as``
# (lost with the switch); bwrap sets no_new_privs, so nothing regains them.
ROOT_NAMESPACES = ("--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts")
ROOT_CAPS = ("--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID")


def isolation_options(network: bool) -> list[str]:
    """Namespaces and capabilities: all unshared and none kept, or as root (see above) all
    but the user namespace and the two the launcher's switch needs; the host's network only
    when ``network``."""
    if runs_as_root():
        options = [*ROOT_NAMESPACES, "--unshare-cgroup-try", *ROOT_CAPS]
        if network:
            options.remove("--unshare-net")
    else:
        options = ["--unshare-all", "--cap-drop", "ALL"]
        if network:
            options.append("--share-net")
    return [*options, "--die-with-parent", "--new-session"]


def parent_dirs(binds: list[str]) -> list[str]:
    """``--dir`` options (mode 0755) for the directories above the bind destinations: bwrap
    copies the host's modes onto those it creates, and a 0700 /root or pytest directory would
    keep ``run_as`` from its own interpreter and workdir. They hold only the binds."""
    skip = {"/", "/tmp", *SYSTEM_ROOTS}
    above: set[str] = set()
    for destination in binds:
        above.update(str(p) for p in Path(destination).parents if str(p) not in skip)
    ordered = sorted(above, key=lambda p: (p.count("/"), p))
    return [arg for path in ordered for arg in ("--perms", "0755", "--dir", path)]


def bwrap_options(spec: LaunchSpec, env: Mapping[str, str]) -> list[str]:
    """The bubblewrap options for ``spec`` (order matters: /tmp before binds under it)."""
    options = isolation_options(network=bool(spec.egress_hosts))
    options += ["--dev", "/dev", "--proc", "/proc"]
    options += ["--size", str(spec.limits.memory_mb * MIB), "--perms", "1777", "--tmpfs", "/tmp"]
    for root in SYSTEM_ROOTS:
        options += _mirror(root)
    options += ["--perms", "0755", "--dir", "/etc"]  # else created 0700 as root
    for entry in ETC_ENTRIES:
        options += _mirror(f"/etc/{entry}")
    binds = readonly_binds(spec, env["PATH"])
    options += parent_dirs([*binds[2::3], str(spec.workdir), str(spec.scratch)])
    options += binds
    options += ["--ro-bind", str(LAUNCHER_FILE), SANDBOX_LAUNCHER]
    options += ["--ro-bind", str(spec.workdir), str(spec.workdir)]
    options += ["--bind", str(spec.scratch), str(spec.scratch)]
    # The launcher enters the workdir once it is run_as: root without capabilities cannot.
    return [*options, "--chdir", "/"]


class SandboxTier:
    """Tier 2: the launcher inside bubblewrap (``bwrap``, Debian package ``bubblewrap``).

    HOME and TMPDIR are the scratch directory, the only writable place that outlives a call;
    /tmp is a private tmpfs capped at the memory limit."""

    name: Literal["subprocess", "sandbox"] = "sandbox"

    def __init__(self, bwrap: str = "bwrap") -> None:
        self._bwrap = bwrap
        self._probe_lock = threading.Lock()
        self._probed: tuple[str | None, str | None] | None = None

    def available(self) -> str | None:
        """``None`` once bwrap is found and a probe sandbox ran; cached after the first call."""
        return self._probe()[1]

    def launch(self, spec: LaunchSpec) -> Launch:
        """``bwrap <options> -- python -I /run/doraforge/launcher.py <limits> -- command``."""
        bwrap, reason = self._probe()
        if bwrap is None:
            raise TierUnavailable(
                "MCP_TIER_UNAVAILABLE",
                f"server {spec.name!r} needs tier 2 (sandbox): {reason}",
                details={"server": spec.name, "tier": 2},
            )
        prepare_dirs(spec)
        env = clean_env(spec, home=spec.scratch, tmpdir=spec.scratch)
        argv = [*bwrap_options(spec, env), "--", sys.executable]
        launched = launcher_argv(spec, env, SANDBOX_LAUNCHER, cwd=str(spec.workdir))
        return Launch(bwrap, [*argv, *launched], env, spec.workdir)

    def _probe(self) -> tuple[str | None, str | None]:
        with self._probe_lock:
            if self._probed is None:
                self._probed = _probe_bwrap(self._bwrap)
            return self._probed


def _probe_bwrap(bwrap: str) -> tuple[str | None, str | None]:
    """(absolute bwrap path, None) when a minimal sandbox starts, else (None, reason)."""
    found = shutil.which(bwrap)
    if found is None:
        return None, "bwrap (bubblewrap) is not installed: run `make sandbox`"
    # The same namespaces and capabilities a launch asks for (they differ as root).
    probe = [found, *isolation_options(network=False)]
    probe += [*(arg for root in SYSTEM_ROOTS for arg in _mirror(root)), "--", "true"]
    try:
        done = subprocess.run(probe, capture_output=True, text=True, timeout=PROBE_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"bwrap did not start a sandbox ({exc}); check `{found} --version`"
    if done.returncode != 0:
        line = (done.stderr.strip().splitlines() or ["no message"])[-1]
        return None, f"bwrap cannot create namespaces here ({line}); enable user namespaces"
    return found, None


def exit_reason(returncode: int | None, limits: Limits) -> str:
    """One line saying how a server's process ended, naming the limit a signal points to.

    A negative status is the signal that killed the process (tier 1); bubblewrap reports a
    sandboxed child killed by signal N as status 128 + N (tier 2), decoded the same way."""
    if returncode is None:
        return "still running"
    if returncode < 0:
        return f"killed by {_signal_reason(-returncode, limits)}"
    if returncode > SHELL_SIGNAL_BASE and returncode - SHELL_SIGNAL_BASE in signal.valid_signals():
        signalled = _signal_reason(returncode - SHELL_SIGNAL_BASE, limits)
        return f"exited with status {returncode} (killed by {signalled})"
    return f"exited with status {returncode}"


SHELL_SIGNAL_BASE = 128


def _signal_reason(number: int, limits: Limits) -> str:
    if number not in signal.valid_signals():
        return f"signal {number}"
    sig = signal.Signals(number)
    hints = {
        signal.SIGXCPU: f"the CPU time limit of {limits.cpu_s} s",
        signal.SIGKILL: f"the CPU limit of {limits.cpu_s} s, the memory limit or the manager",
        signal.SIGSEGV: f"likely the memory limit of {limits.memory_mb} MiB",
        signal.SIGXFSZ: "the file size limit",
    }
    hint = hints.get(sig)
    return sig.name + (f": {hint}" if hint else "")


TIERS: dict[int, Tier] = {1: SubprocessTier(), 2: SandboxTier()}
