"""Errors of the verification package: one base, coded like the rest of doraforge."""

from __future__ import annotations

from typing import Any


class VerifyError(ValueError):
    """Base of verification errors; carries a stable ``code``, ``retryable`` and ``details``."""

    code = "verify_error"
    retryable = False

    def __init__(self, message: str, *, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.details: dict[str, Any] = details or {}


class InvalidContract(VerifyError):
    """A verification contract failed validation; ``details["errors"]`` names each field."""

    code = "invalid_contract"


class DuplicateVerifier(VerifyError):
    """A verifier was registered twice under the same criterion kind."""

    code = "duplicate_verifier"
