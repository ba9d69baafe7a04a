"""``python -m sparkey``: see sparkey.cli."""

import sys

from sparkey.cli import main

sys.exit(main())
