"""What every command needs: the PAOS home, the output, and lazily built services."""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass, field
from typing import Any

from paos.cli.output import Output
from paos.home import PaosHome


@dataclass
class Context:
    """The parsed global options and the objects built from them on demand."""

    home: PaosHome
    out: Output
    _runtime: Any = field(default=None, repr=False)

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Context:
        return cls(
            PaosHome.from_environment(os.environ, explicit=args.home), Output(as_json=args.json)
        )

    def runtime(self) -> Any:
        """The home's RuntimeManager."""
        if self._runtime is None:
            from paos.skills.runtime import RuntimeManager

            self._runtime = RuntimeManager(self.home)
        return self._runtime

    def service(self) -> Any:
        """A TaskService on the home whose tasks can bind to running skills."""
        from paos.home import open_service
        from paos.skills.activation import activate_skill

        service = open_service(self.home)
        service.activate_skill = lambda name: activate_skill(self.home, name, self.runtime())
        return service
