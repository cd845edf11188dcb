"""python -m automation: see automation/cli.py.

The package is loaded as ``deepseek_eks.automation`` (the name the wheel has), not as the
``automation`` folder ``-m`` names: one name per module, whichever way the CLI starts."""

import os
import sys

from deepseek_eks.automation.cli import main

try:
    sys.exit(main())
except BrokenPipeError:
    # The reader went away (``| head``): no traceback; silence the interpreter's final flush too.
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    sys.exit(0)
