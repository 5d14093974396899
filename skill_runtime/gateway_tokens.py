"""The bearer tokens of skill-started Gateways, and which token PAOS presents to a Gateway.

Every ``skill start`` writes a fresh random token to ``runtime/tokens/<name>.token``
(mode 0600, in a 0700 directory), hands the Gateway the file's path through
``DORAFORGE_GATEWAY_TOKEN_FILE`` and records the path in the runtime state; a stop or a
failed start removes it. A skill's Gateway is therefore authenticated even on loopback,
and only processes of this user that can read the home can talk to it.

:class:`GatewayTokens` answers "which token for this URL": the token of a live runtime of
this home serving that URL, else the operator's token (for ad-hoc Gateways), else none.
"""

from __future__ import annotations

import contextlib
import logging
from pathlib import Path

from doraforge.skill_runtime.runtime_state import RuntimeState, all_states
from doraforge.wire.tokens import TokenError, load_token, write_token

log = logging.getLogger("doraforge.skill_runtime.gateway_tokens")

#: What identifies the runtime directory's state files: (name, inode, mtime, ctime, size).
type _Identity = tuple[tuple[str, int, int, int, int], ...]


def token_path(runtime_dir: Path, name: str) -> Path:
    """``runtime/tokens/<name>.token``."""
    return runtime_dir / "tokens" / f"{name}.token"


def create_token_file(runtime_dir: Path, name: str) -> Path:
    """Write a new token for one start of ``name`` (replacing any earlier one); its path."""
    path = token_path(runtime_dir, name)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.parent.chmod(0o700)  # the directory lists which skills run; keep it private too
    write_token(path)
    return path


def remove_token_file(path: str | Path | None) -> None:
    """Remove a runtime's token file; a missing one is fine (already removed)."""
    if path is not None:
        with contextlib.suppress(FileNotFoundError):
            Path(path).unlink()


def runtime_token(state: RuntimeState) -> str | None:
    """The token recorded for ``state``, or ``None`` when it has none or it cannot be read.

    Never raises: an unreadable token makes the Gateway answer 401, which every caller
    already reports; the reason is logged (without the token).
    """
    if state.gateway_token_file is None:
        return None
    try:
        return load_token(env=None, file=state.gateway_token_file, environ={})
    except TokenError as exc:
        log.warning("skill %s: %s", state.name, exc)
        return None


class GatewayTokens:
    """Which bearer token to present to a Gateway URL (a :data:`paos.client.TokenLookup`).

    A live runtime of this home whose recorded Gateway URL is ``url`` gives its own
    token (read afresh on every call, so a restart's new token is picked up); any other
    URL gets the ``operator`` token, or none. The operator token is never offered to a
    skill's Gateway, and a runtime's token never to any URL but the one it serves.

    It is asked before every HTTP request, so the state files are parsed again only when
    one was added, removed or replaced (their ``stat`` identity changed), not per call.
    """

    def __init__(self, runtime_dir: Path, *, operator: str | None = None) -> None:
        self._runtime_dir = runtime_dir
        self._operator = operator
        # (state files' identity, the live states read under it), replaced as one value.
        self._seen: tuple[_Identity, list[RuntimeState]] | None = None

    def __repr__(self) -> str:
        operator = "set" if self._operator else None
        return f"GatewayTokens({str(self._runtime_dir)!r}, operator={operator})"

    def __call__(self, url: str) -> str | None:
        wanted = url.rstrip("/")
        for state in self._live_states():
            if state.gateway_url.rstrip("/") == wanted:
                return runtime_token(state)
        return self._operator

    def _live_states(self) -> list[RuntimeState]:
        # The identity is taken before the files are read: a write racing the read
        # changes it again, so the next call re-reads instead of keeping a stale list.
        identity = _state_files_identity(self._runtime_dir)
        seen = self._seen
        if seen is not None and seen[0] == identity:
            return seen[1]
        live = [state for state in all_states(self._runtime_dir) if state.live]
        self._seen = (identity, live)
        return live


def _state_files_identity(runtime_dir: Path) -> _Identity:
    """Name, inode, mtime, ctime and size of every state file (``atomic_write`` renames a
    new file over the old one, so every write changes the inode and the times)."""
    found = []
    for path in sorted(runtime_dir.glob("*.json")):
        with contextlib.suppress(OSError):  # removed between the listing and the stat
            st = path.stat()
            found.append((path.name, st.st_ino, st.st_mtime_ns, st.st_ctime_ns, st.st_size))
    return tuple(found)
