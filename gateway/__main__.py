"""``python -m gateway``: run the Gateway Dora node."""

import sys

from gateway.main import main

sys.exit(main())
