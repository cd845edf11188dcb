"""The one import package, ``deepseek_eks``, from the checkout's top-level folders.

The project keeps the folders it is specified with (components/, settings/, sizing/, ...; docs/layout.md)
and ships them inside ``deepseek_eks``: each folder is the package directory of its
subpackage (``deepseek_eks.components`` is ``components/``), and its subpackages are found in it,
so a new folder with an ``__init__.py`` is packaged without a list to keep. The rest of the
configuration is in pyproject.toml.

``pip install -e .`` (``make venv``, requirements.txt) maps the same names onto the checkout's
folders, so the program, the command-line tools and the tests import ``deepseek_eks.<name>`` from
the files you edit; a wheel holds them under ``deepseek_eks/`` and no generic top-level name.
"""

from setuptools import find_packages, setup

PACKAGE = "deepseek_eks"
# deepseek_eks.<name> <- <name>/, for each of these top-level folders.
FOLDERS = ("automation", "components", "guardrails", "perf", "policy", "promql", "settings", "sizing", "twin")


def packages() -> list[str]:
    found = [PACKAGE, *(f"{PACKAGE}.{sub}" for sub in find_packages(PACKAGE))]
    for folder in FOLDERS:
        found += [f"{PACKAGE}.{folder}", *(f"{PACKAGE}.{folder}.{sub}" for sub in find_packages(folder))]
    return found


setup(
    packages=packages(),
    package_dir={PACKAGE: PACKAGE, **{f"{PACKAGE}.{folder}": folder for folder in FOLDERS}},
)
