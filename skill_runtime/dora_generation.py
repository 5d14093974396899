"""Which Dora generation a dataflow needs, and whether the installed ``dora`` is one.

Dora 0.x and 1.x are different generations: each rejects the other's dataflow fields
(``unknown field 'max_restarts'`` on 0.4.1, ``unknown field 'custom'`` on 1.1), and nodes
of one generation cannot talk to the daemon of the other (``failed to deserialize
DaemonRequest``). doraforge runs on Dora 1.1 (``dora-rs-cli`` and ``dora-rs`` 1.1.x);
PhyAgentOS documents Dora 0.4.1 as its baseline.

A dataflow declares its generation by what it uses: a field or form that one generation
accepts and the other refuses (:data:`FORMS`) makes the dataflow need that generation. The
table is read from dora-rs itself: the ``Descriptor``, ``Node``, ``Debug`` and ``Input``
definitions (``libraries/message/src/descriptor.rs`` and ``config.rs``) at the 0.4.1 and
0.5.0 tags against the 1.1.0 CLI's own ``dora validate`` field lists, and Dora's
``docs/migration-from-0.x.md`` ("Descriptor changes"). Fields both accept
(``restart_policy`` is in 0.4.1 already) are not in it. No extra manifest or profile field
is involved, so the same bundle still installs in PhyAgentOS (whose manifest refuses
unknown profile fields).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from doraforge.wire import strict_yaml

#: The generation doraforge itself runs on, and how to install it.
SUPPORTED_MAJOR = 1
INSTALL_HINT = "pip install 'dora-rs-cli>=1.1,<1.2' 'dora-rs>=1.1,<1.2'"
_VERSION = re.compile(r"(\d+)\.(\d+)(?:\.(\d+))?")

type Scope = Literal["dataflow", "node", "input", "debug"]


@dataclass(frozen=True)
class Form:
    """A dataflow field only Dora ``major``.x accepts, where it sits, and (for a 0.x form)
    how Dora 1.x spells it instead."""

    scope: Scope
    field: str
    major: int
    rewrite: str | None = None


def _one_x(scope: Scope, *fields: str) -> tuple[Form, ...]:
    return tuple(Form(scope, field, 1) for field in fields)


#: Every generation-only form doraforge knows, in the order a refusal names them.
FORMS: tuple[Form, ...] = (
    # Dora 0.x forms that Dora 1.x removed (1.x refuses each one by name).
    Form("dataflow", "communication", 0, "delete the `communication` block"),
    Form("dataflow", "_unstable_deploy", 0, "rename `_unstable_deploy` to `deploy`"),
    Form("dataflow", "_unstable_debug", 0, "rename `_unstable_debug` to `debug`"),
    Form("node", "_unstable_deploy", 0, "rename the node's `_unstable_deploy` to `deploy`"),
    Form(
        "node",
        "custom",
        0,
        "move the `custom` fields onto the node itself (`custom.envs` becomes `env`)",
    ),
    Form(
        "debug",
        "publish_all_messages_to_zenoh",
        0,
        "rename `publish_all_messages_to_zenoh` to `enable_debug_inspection`",
    ),
    # Dora 1.x fields that no 0.x release knows (0.x refuses them as unknown fields).
    *_one_x(
        "dataflow",
        "deploy",
        "debug",
        "health_check_interval",
        "strict_types",
        "exit_when_nodes_finish",
        "type_rules",
    ),
    *_one_x(
        "node",
        "max_restarts",
        "restart_delay",
        "max_restart_delay",
        "restart_window",
        "health_check_timeout",
        "finish_grace_secs",
        "startup_timeout",
        "deploy",
        "path_sha256",
        "ros2",
        "hub",
        "module",
        "params",
        "pattern",
        "cpu_affinity",
        "shared_memory_pool_size",
        "output_types",
        "output_framing",
        "input_types",
        "output_metadata",
        "send_logs_as",
        "min_log_level",
        "max_log_size",
        "max_rotated_files",
    ),
    *_one_x("input", "input_timeout", "queue_policy"),
)


@dataclass(frozen=True)
class Use:
    """One generation-only form found in a dataflow, and where (``node 'arm'``)."""

    form: Form
    where: str

    def describe(self) -> str:
        kind = "a Dora 0.x form Dora 1.x removed" if self.form.major == 0 else "a Dora 1.x field"
        return f"{self.where} uses {self.form.field}, {kind}"


def version_tuple(text: str) -> tuple[int, int, int] | None:
    """``"dora-cli 1.1.0"`` -> ``(1, 1, 0)``; ``None`` when no version is in ``text``."""
    found = _VERSION.search(text)
    if found is None:
        return None
    major, minor, patch = found.groups()
    return int(major), int(minor), int(patch or 0)


def generation(version: str) -> str:
    """The generation a version belongs to: ``"1.x"`` for 1.1.0, ``"0.x"`` for 0.4.1."""
    parsed = version_tuple(version)
    return f"{parsed[0]}.x" if parsed is not None else "unknown"


def compatible(first: str, second: str) -> bool:
    """Whether Dora processes of these two versions can talk to each other.

    Dora's own register check (``versions_compatible`` in dora-message) is semver caret
    matching either way: one major from 1 on, one ``major.minor`` below 1 (0.4 and 0.5 do
    not talk). Unreadable versions are not compatible.
    """
    a, b = version_tuple(first), version_tuple(second)
    if a is None or b is None:
        return False
    return a[:2] == b[:2] if a[0] == 0 or b[0] == 0 else a[0] == b[0]


def uses(document: Mapping[str, Any]) -> list[Use]:
    """Every generation-only form ``document`` uses, in :data:`FORMS` order per place."""
    return [
        use for where, scope, mapping in _places(document) for use in _found(where, scope, mapping)
    ]


def _found(where: str, scope: Scope, mapping: Mapping[str, Any]) -> Iterator[Use]:
    for form in FORMS:
        if form.scope == scope and form.field in mapping:
            yield Use(form, where)


def _places(document: Mapping[str, Any]) -> Iterator[tuple[str, Scope, Mapping[str, Any]]]:
    """Each mapping of the dataflow a form can sit in: the top level, ``debug`` blocks,
    nodes and their inputs in the long form (``{source: …, queue_size: …}``)."""
    yield "the dataflow", "dataflow", document
    for key in ("debug", "_unstable_debug"):
        if isinstance(document.get(key), Mapping):
            yield f"the dataflow's {key}", "debug", document[key]
    nodes = document.get("nodes")
    for node in nodes if isinstance(nodes, list) else []:
        if not isinstance(node, Mapping):
            continue
        where = f"node {node.get('id')!r}"
        yield where, "node", node
        inputs = node.get("inputs")
        for name, value in inputs.items() if isinstance(inputs, Mapping) else []:
            if isinstance(value, Mapping):
                yield f"{where} input {name!r}", "input", value


def foreign_uses(document: Mapping[str, Any], major: int) -> list[Use]:
    """The forms of ``document`` that Dora ``major``.x does not accept."""
    return [use for use in uses(document) if use.form.major != major]


def dataflow_needs(document: Mapping[str, Any]) -> tuple[int, str] | None:
    """``(major, reason)`` for the first generation-only form ``document`` uses."""
    found = uses(document)
    return (found[0].form.major, found[0].describe()) if found else None


def refusal(dataflow: Path, installed: str) -> str | None:
    """Why ``dataflow`` cannot run on the installed Dora ``installed``, or ``None``.

    The one-line message names the first form the installed generation refuses, where it
    is, the generation it needs, the installed version and the fix (how many more forms
    there are, too). An unreadable dataflow is not refused here (Dora reports its own
    parse error), nor is any dataflow when ``installed`` has no version in it.
    """
    try:
        document = strict_yaml.load(dataflow.read_text(encoding="utf-8"), aliases=True)
    except (OSError, UnicodeDecodeError, strict_yaml.YAMLRefused):
        return None
    parsed = version_tuple(installed)
    if not isinstance(document, Mapping) or parsed is None:
        return None
    found = foreign_uses(document, parsed[0])
    if not found:
        return None
    first, more = found[0], len(found) - 1
    also = f"; {more} more such field{'s' if more > 1 else ''}" if more else ""
    return (
        f"{dataflow.name} needs Dora {first.form.major}.x ({first.describe()}{also}) but the "
        f"installed dora is {installed} (Dora {generation(installed)}); {_fix(first.form)}"
    )


def _fix(form: Form) -> str:
    if form.major == SUPPORTED_MAJOR:
        return f"install Dora {form.major}.x: {INSTALL_HINT}"
    if form.rewrite is not None:
        return f"doraforge runs Dora {SUPPORTED_MAJOR}.x, so rewrite it: {form.rewrite}"
    return f"doraforge runs Dora {SUPPORTED_MAJOR}.x only; run it with a Dora {form.major}.x CLI"


def library_refusal(cli: str, library: str | None) -> str | None:
    """Why nodes using the ``dora-rs`` node library ``library`` cannot run under the dora
    CLI ``cli`` (its daemon), or ``None`` when they can; ``None`` for ``library`` means
    the package is not installed."""
    if library is None:
        return f"the dora node library (dora-rs) is not installed: {INSTALL_HINT}"
    if compatible(cli, library):
        return None
    parsed = version_tuple(cli)
    pin = f"'dora-rs=={parsed[0]}.{parsed[1]}.*'" if parsed else "dora-rs"
    return (
        f"the dora node library dora-rs {library} (Dora {generation(library)}) cannot talk to "
        f"the daemon of the dora CLI {cli} (Dora {generation(cli)}; nodes fail with "
        f"'failed to deserialize DaemonRequest'): pip install {pin}"
    )
