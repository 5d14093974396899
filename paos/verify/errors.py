"""Errors of the verification package, inside the PAOS error tree."""

from __future__ import annotations

from typing import Any

from doraforge.paos.errors import PaosError


class VerifyError(PaosError, ValueError):
    """Base of verification errors; carries a stable ``code``, ``retryable`` and ``details``."""

    default_code = "PAOS_VERIFY_ERROR"

    def __init__(self, message: str, *, details: dict[str, Any] | None = None) -> None:
        super().__init__(self.default_code, message, details=details)


class InvalidContract(VerifyError):
    """A verification contract failed validation; ``details["errors"]`` names each field."""

    default_code = "PAOS_INVALID_CONTRACT"


class DuplicateVerifier(VerifyError):
    """A verifier was registered twice under the same criterion kind."""

    default_code = "PAOS_DUPLICATE_VERIFIER"
