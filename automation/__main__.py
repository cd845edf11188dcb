"""python -m automation: see automation/cli.py."""

import sys

from .cli import main

sys.exit(main())
