"""``python -m doraforge.cli``: the ``doraforge`` command line."""

import sys

from doraforge.cli import main

sys.exit(main())
