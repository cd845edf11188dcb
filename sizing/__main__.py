"""``python -m sizing``: the sizing engine alone (see README, "Sizing"), as ``deepseek-eks-sizing``.

A thin entry point over the one package: the CLI loads as ``deepseek_eks.sizing`` (the name the
wheel and the tests use), whichever way it starts, so no module is loaded under two names."""

from deepseek_eks.console import sizing

sizing()
