"""python -m automation: see automation/cli.py.

The package is loaded as ``deepseek_eks.automation`` (the name the wheel has), not as the
``automation`` folder ``-m`` names: one name per module, whichever way the CLI starts; the same
entry point as the ``deepseek-eks`` console script."""

from deepseek_eks.console import automation

automation()
