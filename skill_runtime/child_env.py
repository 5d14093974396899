"""The environment a started skill's hook and nodes run with: the operator's variables
that an allowlist names (what a node needs to run), never a registry, operator or Gateway
token."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from doraforge.dataflows import ZENOH_OVERLAY
from doraforge.skill_runtime.dora_run import node_interpreter_environment
from doraforge.wire.tokens import secret_name

#: Variables passed as they are: a node or hook needs them to run, and none is a secret.
PASSED_NAMES = frozenset(
    {
        # the process basics
        "PATH",
        "HOME",
        "USER",
        "LOGNAME",
        "SHELL",
        "LANG",
        "LANGUAGE",
        "TZ",
        "TMPDIR",
        "TMP",
        "TEMP",
        "XDG_RUNTIME_DIR",
        "XDG_STATE_HOME",
        "XDG_CACHE_HOME",
        "XDG_CONFIG_HOME",
        "XDG_DATA_HOME",
        # the interpreter and its libraries
        "VIRTUAL_ENV",
        "CONDA_PREFIX",
        "LD_LIBRARY_PATH",
        "SSL_CERT_FILE",
        "SSL_CERT_DIR",
        "OMP_NUM_THREADS",
        "OPENBLAS_NUM_THREADS",
        "MKL_NUM_THREADS",
        # display and rendering (MuJoCo, OpenGL, GPUs)
        "MUJOCO_GL",
        "PYOPENGL_PLATFORM",
        "EGL_PLATFORM",
        "DISPLAY",
        "WAYLAND_DISPLAY",
        "XAUTHORITY",
        "CUDA_VISIBLE_DEVICES",
        "NVIDIA_VISIBLE_DEVICES",
        "NVIDIA_DRIVER_CAPABILITIES",
        # diagnostics
        "RUST_LOG",
        "RUST_BACKTRACE",
        # doraforge's own node settings
        "DORAFORGE_LOG_LEVEL",
    }
)
#: Families passed as they are (locale, Python, Dora, Mesa, the simulation knobs).
PASSED_PREFIXES = ("LC_", "PYTHON", "DORA_", "MESA_", "LIBGL_", "DORAFORGE_SIM_")


def passed(name: str) -> bool:
    """Whether the allowlist lets ``name`` through from the operator's environment."""
    if secret_name(name):
        return False
    return name in PASSED_NAMES or name.startswith(PASSED_PREFIXES)


def skill_environment(environ: Mapping[str, str], runtime_bin: Path) -> dict[str, str]:
    """The base environment of this home's Dora services, the ``dora`` commands and the
    start hook: the allowlisted part of ``environ`` with ``runtime_bin``'s interpreter
    pinned (:func:`~doraforge.skill_runtime.dora_run.node_interpreter_environment`), the
    project's Zenoh overlay unless one is set, and unbuffered Python output.

    The daemon hands its environment to every node of every skill of the home, so it holds
    nothing of any one skill: a skill's own variables go per dataflow (``dora start
    --env``), its Gateway's token file to its Gateway node only."""
    env = {key: value for key, value in environ.items() if passed(key)}
    env = node_interpreter_environment(env, runtime_bin)
    env.setdefault("DORA_ZENOH_CONFIG_OVERLAY", str(ZENOH_OVERLAY))
    env["PYTHONUNBUFFERED"] = "1"
    return env


def declared_environment(required: list[str], environ: Mapping[str, str]) -> dict[str, str]:
    """The variables a profile's ``required_environment`` names, from ``environ`` (a
    profile declares what it needs from the operator; a secret name is refused at
    preflight, so it never gets here)."""
    return {name: environ[name] for name in required if environ.get(name) and not secret_name(name)}
