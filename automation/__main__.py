"""python -m automation: see automation/cli.py."""

import os
import sys

from .cli import main

try:
    sys.exit(main())
except BrokenPipeError:
    # The reader went away (``| head``): no traceback; silence the interpreter's final flush too.
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    sys.exit(0)
