"""The camera provider node: ``python -m doraforge.nodes.camera [--sources scene,wrist]``.

Dataflow stanza::

    - id: camera
      path: python
      args: -m doraforge.nodes.camera
      inputs:
        tool_request: gateway/camera_out
        image_scene: world/image_scene
        image_wrist: world/image_wrist
      outputs:
        - tool_response
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from doraforge.nodes.camera.endpoint import SOURCES, definition
from doraforge.nodes.cli import build_parser, configure_logging, options_from_args
from doraforge.nodes.runner import run_endpoint


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``camera`` endpoint as a Dora node until Dora stops it."""
    parser = build_parser("doraforge camera ToolEndpoint provider", os.environ)
    parser.add_argument(
        "--sources", default=",".join(SOURCES), help="comma-separated camera sources"
    )
    args = parser.parse_args(argv)
    configure_logging(args.log_level)
    sources = [s for s in args.sources.split(",") if s]
    if not sources:
        parser.error("--sources must name at least one camera")
    return run_endpoint(definition(sources=sources), options=options_from_args(args))


if __name__ == "__main__":
    sys.exit(main())
