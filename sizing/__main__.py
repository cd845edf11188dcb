"""``python -m sizing``: the sizing engine alone (see README, "Sizing")."""

from .cli import main
from .pipe import run_main

run_main(main)
