"""Task verification: the contract, the verifiers behind one Protocol, and aggregation.

The coordinator parses a :class:`VerificationContract`, builds a
:class:`VerificationContext`, runs :func:`run_criteria` over a :class:`VerifierRegistry`,
then :func:`decide` and :func:`apply_mode`. Nothing here performs transport of its own
except the external verifier's single POST.
"""

from doraforge.paos.verify.aggregate import TaskOutcome, Verdict, VerdictStatus, apply_mode, decide
from doraforge.paos.verify.contract import (
    Criterion,
    EvidencePolicy,
    ExternalCriterion,
    Mode,
    StateCriterion,
    VerificationContract,
    VisionCriterion,
    parse_contract,
)
from doraforge.paos.verify.errors import DuplicateVerifier, InvalidContract, VerifyError
from doraforge.paos.verify.protocol import (
    CriterionResult,
    CriterionStatus,
    QueryFn,
    VerificationContext,
    Verifier,
)
from doraforge.paos.verify.registry import VerifierRegistry, default_registry, run_criteria

__all__ = [
    "Criterion",
    "CriterionResult",
    "CriterionStatus",
    "DuplicateVerifier",
    "EvidencePolicy",
    "ExternalCriterion",
    "InvalidContract",
    "Mode",
    "QueryFn",
    "StateCriterion",
    "TaskOutcome",
    "Verdict",
    "VerdictStatus",
    "VerificationContext",
    "VerificationContract",
    "Verifier",
    "VerifierRegistry",
    "VerifyError",
    "VisionCriterion",
    "apply_mode",
    "decide",
    "default_registry",
    "parse_contract",
    "run_criteria",
]
