"""``python -m sizing``: the sizing engine alone (see README, "Sizing")."""

import sys

from .cli import main

sys.exit(main())
