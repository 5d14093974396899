"""``python -m paos.cli``: the ``doraforge`` command line."""

import sys

from paos.cli import main

sys.exit(main())
