"""python -m automation: see automation/cli.py."""

from deepseek_eks.sizing.pipe import run_main

from .cli import main

run_main(main)
