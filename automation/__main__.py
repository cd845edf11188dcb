"""``python -m automation``: see automation/cli.py; ``simulate`` and ``loadtest`` have their own
command lines (automation/simulate/cli.py, automation/loadtest/cli.py)."""

import sys

if sys.argv[1:2] == ["simulate"]:
    from .simulate.cli import main as simulate_main

    sys.exit(simulate_main(sys.argv[2:]))
if sys.argv[1:2] == ["loadtest"]:
    from .loadtest.cli import main as loadtest_main

    sys.exit(loadtest_main(sys.argv[2:]))

from .cli import main

sys.exit(main())
