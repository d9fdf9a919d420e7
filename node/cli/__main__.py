"""``python -m node.cli``: the ``a2a-node`` command."""

import sys

from node.cli import main

sys.exit(main())
