"""``python -m gateway``: run the Gateway Dora node."""

import sys

from doraforge.gateway.main import main

sys.exit(main())
