"""``python -m automation``: see automation/cli.py; ``simulate`` is automation/simulate/cli.py."""

import sys

if sys.argv[1:2] == ["simulate"]:
    from .simulate.cli import main as simulate_main

    sys.exit(simulate_main(sys.argv[2:]))

from .cli import main

sys.exit(main())
