"""Entry point of the mock provider node: ``python -m doraforge.nodes.mock``.

Dataflow stanza (nodes inherit the environment, so ``python`` must resolve to the
project's interpreter and ``nodes`` must be importable)::

    - id: mock
      path: python
      args: -m doraforge.nodes.mock
      inputs:
        tool_request: gateway/tool_request
      outputs:
        - tool_response
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from doraforge.nodes.cli import parse
from doraforge.nodes.mock.endpoint import definition
from doraforge.nodes.runner import run_endpoint


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``mock`` endpoint as a Dora node until Dora stops it."""
    options = parse("doraforge mock ToolEndpoint provider", argv, os.environ)
    return run_endpoint(definition(), options=options)


if __name__ == "__main__":
    sys.exit(main())
