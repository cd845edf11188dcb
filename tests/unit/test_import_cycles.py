"""No import cycles among the project's own modules: the import graph of the ``deepseek_eks``
package (its subpackages are the checkout's top-level folders) is acyclic. And the folders keep
their layers: the component package (components/, and the pure settings/, sizing/, promql/ it
builds on) imports nothing from operations (automation/), the performance instruments (perf/),
the guardrails (guardrails/) or the twin (twin/).

The graph is read from the source with ``ast``, every ``import`` and ``from ... import`` counted
wherever it stands: at module level, inside a function (a deferred import still ties the two
modules together, and hiding one there is how a cycle is usually dodged) and under
``if TYPE_CHECKING:`` (a type-only cycle is still two modules that cannot be understood apart).
``from pkg import name`` is an edge to ``pkg.name`` when that is a module, else to ``pkg``
(its ``__init__``). The implicit import of a parent package's ``__init__`` is not an edge:
every submodule has it, and counting it would make each package a cycle with its children.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "deepseek_eks"


def _setup_folders() -> tuple[str, ...]:
    """setup.py's ``FOLDERS``: the package's subpackages as the checkout holds them (deepseek_eks/<name>
    in a wheel), read from the one place that declares them."""
    for node in ast.parse((ROOT / "setup.py").read_text()).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "FOLDERS" for t in node.targets):
            return tuple(ast.literal_eval(node.value))
    raise AssertionError("setup.py declares no FOLDERS")


FOLDERS = _setup_folders()
# What the component package is made of, and the folders that build on it but never under it.
LIBRARY = ("components", "settings", "sizing", "promql")
TOOLING = ("automation", "perf", "guardrails", "twin")


def _modules() -> dict[str, Path]:
    """Dotted module name -> file, for every module of the package."""
    modules: dict[str, Path] = {}

    def add(path: Path, base: Path, prefix: tuple[str, ...]) -> None:
        parts = prefix + path.relative_to(base).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = path

    for path in (ROOT / PACKAGE).rglob("*.py"):  # the package's own files (testing/, schema.py, ...)
        add(path, ROOT / PACKAGE, (PACKAGE,))
    for folder in FOLDERS:
        for path in (ROOT / folder).rglob("*.py"):
            add(path, ROOT / folder, (PACKAGE, folder))
    return modules


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The project's module ``name`` stands for, in the package's spelling; None for others."""
    if name.split(".")[0] in FOLDERS:  # the checkout's top-level spelling (automation.api)
        name = f"{PACKAGE}.{name}"
    while name and name not in modules:  # a name inside a module: the module
        name = name.rpartition(".")[0]
    return name or None


def imports(module: str, path: Path, modules: dict[str, Path]) -> Iterator[str]:
    """The project's modules ``module`` imports, anywhere in its file."""
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if (target := _resolve(alias.name, modules)) is not None:
                    yield target
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                base = base if is_package else base[:-1]
                base = base[: len(base) - (node.level - 1)]
                source = ".".join([*base, *([node.module] if node.module else [])])
            else:
                source = node.module or ""
            for alias in node.names:
                if (target := _resolve(f"{source}.{alias.name}", modules)) is not None:
                    yield target


def graph() -> dict[str, set[str]]:
    modules = _modules()
    return {m: {t for t in imports(m, p, modules) if t != m} for m, p in modules.items()}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for succ in sorted(edges.get(node, ())):
            if succ not in index:
                visit(succ)
                low[node] = min(low[node], low[succ])
            elif succ in on_stack:
                low[node] = min(low[node], index[succ])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return sorted(found)


def test_the_checker_sees_a_cycle_and_its_spellings() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []
    modules = _modules()
    assert "deepseek_eks.automation.api" in modules and "deepseek_eks.settings" in modules
    assert _resolve("automation.api.Stack", modules) == "deepseek_eks.automation.api"
    edges = graph()
    # ``from .model import Settings`` in settings/__init__.py, resolved to the module.
    assert "deepseek_eks.settings.model" in edges["deepseek_eks.settings"]


def test_no_import_cycle_among_the_projects_modules() -> None:
    edges = graph()
    found = cycles(edges)
    detail = [
        " <-> ".join(c) + ": " + "; ".join(f"{m} -> {sorted(edges[m] & set(c))}" for m in c) for c in found
    ]
    assert not found, f"{len(found)} import cycle(s):\n" + "\n".join(detail)


def _folder(module: str) -> str:
    """``deepseek_eks.components.build`` -> ``components`` ("" for the package's own modules)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def test_the_component_package_imports_no_tooling() -> None:
    assert set(LIBRARY) | set(TOOLING) <= set(FOLDERS), "a layer names a folder setup.py does not package"
    offending = sorted(
        f"{module} -> {target}"
        for module, targets in graph().items()
        if _folder(module) in LIBRARY
        for target in targets
        if _folder(target) in TOOLING
    )
    assert not offending, "the component package imports operations, perf, guardrails or twin:\n" + "\n".join(
        offending
    )
