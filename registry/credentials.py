"""Named credentials for API tools: values go in, names come out.

Threat model. The store keeps secret values in ``<home>/credentials.json``, written
atomically with mode 0600 (a home it creates is made 0700), and refuses to load a file any
other user may read or write. It protects the values against:

* other local users: the file is owner-only, and a file whose mode was widened is refused
  at load with a one-line error rather than trusted;
* logs and the audit trail: a write is recorded by the credential's name only, and no
  code path formats a value into a log line or an error;
* agents and the API: values are write-only through ``PUT /api/credentials/{name}``; every
  answer (list, save, delete, the API tools' list/get and probe reports) carries names,
  scopes and set-at times, never a value; an agent's tool arguments can never reach a
  secret slot (``registry.api_tools.render``).

It does not protect against root or anyone who can act as the serving user, the serving
process's memory (values are held in plain text while it runs, and sent to the upstream
they are configured for), or copies of the home (backups, snapshots): whoever can read the
file can read every value. Values are not encrypted at rest; a key stored beside them would
add nothing against those readers.

Values read from the environment through the config's ``secret_env`` stay a read-only
source (:class:`SecretView`): a name set in both is resolved from the store, so an operator
can rotate a credential without restarting the server.
"""

from __future__ import annotations

import json
import os
import re
import stat
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from doraforge.registry.errors import InvalidRequest, NotFound
from doraforge.wire.errors import StructuredError
from doraforge.wire.files import atomic_write_text

type Scope = Literal["global"]

NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
MAX_VALUE_CHARS = 16_384
FILE_NAME = "credentials.json"
SCHEMA_VERSION = 1


class CredentialFileError(StructuredError, OSError):
    """``CREDENTIALS_FILE_UNSAFE`` / ``CREDENTIALS_FILE_INVALID``: the file cannot be trusted
    or read; nothing was loaded. An ``OSError`` too, as any failure to open a state file."""


@dataclass(frozen=True)
class Credential:
    """One stored credential; ``value`` is never part of any public form."""

    name: str
    value: str
    scope: Scope
    set_at: float

    def public(self) -> dict[str, Any]:
        """What an answer may carry: the name, the scope and when it was set."""
        return {"name": self.name, "scope": self.scope, "setAt": self.set_at}


def check_name(name: str) -> None:
    """:class:`InvalidRequest` ``CREDENTIAL_NAME_INVALID`` unless ``name`` is an identifier."""
    if not NAME.match(name):
        raise InvalidRequest(
            "CREDENTIAL_NAME_INVALID",
            f"credential name {name[:80]!r} must be an identifier (letters, digits, _; ≤64)",
        )


def _check_value(value: Any) -> str:
    # The message never repeats the value: it may be the secret the caller meant to set.
    if not isinstance(value, str) or not value or len(value) > MAX_VALUE_CHARS:
        raise InvalidRequest(
            "CREDENTIAL_VALUE_INVALID",
            f'the body must be {{"value": "<1 to {MAX_VALUE_CHARS} characters>"}}',
        )
    if any(ch in value for ch in "\r\n\0"):
        raise InvalidRequest(
            "CREDENTIAL_VALUE_INVALID", "the value must not contain CR, LF or NUL characters"
        )
    return value


def _check_mode(path: Path) -> None:
    mode = path.stat().st_mode
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise CredentialFileError(
            "CREDENTIALS_FILE_UNSAFE",
            f"{path} is readable or writable by other users (mode {stat.S_IMODE(mode):o}); "
            f"run chmod 600 {path} and start again",
            details={"path": str(path), "mode": f"{stat.S_IMODE(mode):o}"},
        )


def _parse(path: Path, text: str) -> dict[str, Credential]:
    rows: dict[str, Any] = {}
    try:
        document = json.loads(text)
        if document.get("schemaVersion") != SCHEMA_VERSION:
            raise ValueError("not schemaVersion 1")
        rows = document["credentials"]
        loaded: dict[str, Credential] | None = {
            name: Credential(name, row["value"], "global", float(row["setAt"]))
            for name, row in rows.items()
            if NAME.match(name) and isinstance(row["value"], str) and row["scope"] == "global"
        }
    except (ValueError, TypeError, KeyError, AttributeError):
        loaded = None
    if loaded is None or len(loaded) != len(rows):
        raise CredentialFileError(
            "CREDENTIALS_FILE_INVALID",
            f"{path} is not a doraforge credential file; move it aside and set the credentials "
            "again (doraforge credentials set NAME)",
            details={"path": str(path)},
        )
    return loaded


class CredentialStore:
    """The credentials of one home, persisted in ``path``; loading refuses an unsafe or
    unreadable file (:class:`CredentialFileError`)."""

    def __init__(self, path: Path, *, clock: Any = time.time) -> None:
        self.path, self._clock = path, clock
        self._rows: dict[str, Credential] = {}
        if path.exists():
            _check_mode(path)
            self._rows = _parse(path, path.read_text(encoding="utf-8"))

    def names(self) -> list[dict[str, Any]]:
        """Every credential's public form, sorted by name."""
        return [self._rows[name].public() for name in sorted(self._rows)]

    def get(self, name: str) -> Credential | None:
        return self._rows.get(name)

    def set(self, name: str, value: Any) -> tuple[Credential, bool]:
        """Store ``value`` under ``name`` (global scope); the credential and whether it is new."""
        check_name(name)
        row = Credential(name, _check_value(value), "global", self._clock())
        created = name not in self._rows
        self._write({**self._rows, name: row})
        return row, created

    def delete(self, name: str) -> None:
        """Forget ``name``; :class:`NotFound` ``CREDENTIAL_NOT_FOUND`` when it is not stored."""
        check_name(name)
        if name not in self._rows:
            raise NotFound("CREDENTIAL_NOT_FOUND", f"no credential {name!r}; list them first")
        self._write({k: v for k, v in self._rows.items() if k != name})

    def _write(self, rows: dict[str, Credential]) -> None:
        document = {
            "schemaVersion": SCHEMA_VERSION,
            "credentials": {
                r.name: {"value": r.value, "scope": r.scope, "setAt": r.set_at}
                for r in rows.values()
            },
        }
        if not self.path.parent.exists():
            self.path.parent.mkdir(mode=0o700, parents=True)
        # atomic_write_text's temporary file is created 0600 (mkstemp) and renamed into
        # place, so the value is never readable by others, not even for a moment.
        atomic_write_text(self.path, json.dumps(document, indent=2))
        os.chmod(self.path, 0o600)
        self._rows = rows


class SecretView(Mapping[str, str]):
    """The values API-tool bundles resolve by name: the store first, then the read-only
    ``fallback`` (``settings.secrets``, from ``secret_env``). Live: a credential set or
    deleted through the store is seen by the next request."""

    def __init__(self, store: CredentialStore | None, fallback: Mapping[str, str]) -> None:
        self.store, self.fallback = store, fallback

    def scope_of(self, name: str) -> Scope | None:
        """The scope ``name`` resolves in (every source is global today), ``None`` if unset."""
        row = self.store.get(name) if self.store is not None else None
        if row is not None:
            return row.scope
        return "global" if name in self.fallback else None

    def __getitem__(self, name: str) -> str:
        row = self.store.get(name) if self.store is not None else None
        if row is not None:
            return row.value
        return self.fallback[name]

    def __iter__(self) -> Iterator[str]:
        stored = [r["name"] for r in self.store.names()] if self.store is not None else []
        return iter(sorted({*stored, *self.fallback}))

    def __len__(self) -> int:
        return len(set(self))
