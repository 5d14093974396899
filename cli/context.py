"""What every command needs: the PAOS home, the output, and lazily built services."""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from doraforge.cli.output import Output
from doraforge.paos.home import PaosHome

if TYPE_CHECKING:
    from doraforge.paos.client import TokenLookup


@dataclass
class Context:
    """The parsed global options and the objects built from them on demand.

    ``environ`` is the process environment as the entry point read it; nothing below the
    CLI reads the environment itself.
    """

    home: PaosHome
    out: Output
    environ: Mapping[str, str] = field(default_factory=dict, repr=False)
    _runtime: Any = field(default=None, repr=False)
    _operator_token: tuple[str | None] | None = field(default=None, repr=False)

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Context:
        return cls(
            PaosHome.from_environment(os.environ, explicit=args.home),
            Output(as_json=args.json),
            dict(os.environ),
        )

    def runtime(self) -> Any:
        """The home's RuntimeManager."""
        if self._runtime is None:
            from doraforge.skill_runtime.runtime import RuntimeManager

            self._runtime = RuntimeManager(self.home)
        return self._runtime

    def operator_token(self) -> str | None:
        """The operator's token for ad-hoc Gateways (``DORAFORGE_GATEWAY_TOKEN`` or the file
        ``DORAFORGE_GATEWAY_TOKEN_FILE`` names), read and checked on first use, so commands
        that talk to no Gateway never fail over it."""
        if self._operator_token is None:
            from doraforge.paos.gateway_auth import operator_token

            self._operator_token = (operator_token(self.environ),)
        return self._operator_token[0]

    def gateway_tokens(self, *, operator: bool = True) -> TokenLookup:
        """Which token to present to a Gateway URL: a running skill's own, else (with
        ``operator``) the operator's."""
        from doraforge.skill_runtime.gateway_tokens import GatewayTokens

        token = self.operator_token() if operator else None
        return GatewayTokens(self.home.runtime_dir, operator=token)

    def service(self, tokens: TokenLookup | None = None) -> Any:
        """A TaskService on the home whose tasks can bind to running skills; its clients
        present ``tokens`` (default :meth:`gateway_tokens`)."""
        from doraforge.paos.home import open_service
        from doraforge.skill_runtime.activation import activate_skill

        service = open_service(self.home, token_for=tokens or self.gateway_tokens())
        service.activate_skill = lambda name: activate_skill(self.home, name, self.runtime())
        return service
