"""Every ```bash / ```sh / ```console and ```python block of README.md and docs/**/*.md runs, so a
renamed flag, command or setting breaks a test, not a reader.

- Shell blocks: every ``python -m automation|sizing|policy`` command is parsed by that CLI's own
  argument parser (a renamed flag or command fails), and every ``make`` target must exist
  (``make -n``). Unmarked blocks must hold only offline commands, and those run: ``render``,
  ``plan``, ``diff``, ``simulate``, ``urns``, ``pins``, ``python -m sizing``, ``python -m policy
  check`` and ``make render`` (each distinct command once; renders go to a temporary folder).
- Python blocks run: a program that builds a ``DeepSeekService`` under ``deepseek_eks.testing``'s
  mocks, an example that brings its own ``test_*`` functions by calling them.
- A block preceded by ``<!-- needs: aws -->`` needs AWS or Pulumi credentials (or a cluster),
  ``<!-- needs: twin -->`` the twin's built programs:
  it is not run, but its ``python -m`` commands are still parsed and a Python block must compile
  with every ``from X import Y`` resolving.
- Config keys: every ``pulumi config set`` (blocks and inline code) and every stack-file YAML the
  docs, the shipped stacks and the examples show names a real key in its flat form; the nested
  ``--path`` form is named once, in docs/configuration.md, as an accepted equivalent.
"""

from __future__ import annotations

import ast
import contextlib
import importlib
import io
import json
import os
import re
import shlex
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
MARKER = "<!-- needs: aws -->"
# The same for commands that need the twin's programs built (minutes to an hour of Go builds):
# parsed, not run here; tests/twin and tests/engine run what they do.
MARKERS = {MARKER, "<!-- needs: twin -->"}
# Fences may be indented (a block inside a list item); the block's text is dedented.
FENCE = re.compile(r"^[ \t]*```(bash|sh|console|python)[ \t]*\n(.*?)^[ \t]*```[ \t]*$", re.S | re.M)
# Offline subcommands that run here; any other ``python -m automation`` command needs AWS or Pulumi.
OFFLINE_AUTOMATION = {"render", "plan", "capacity", "diff", "simulate", "urns", "pins"}
# make targets that run here (the others are only checked to exist: ``make test`` is this suite).
RUN_MAKE = {"render"}
TIMEOUT_S = 600


@dataclass(frozen=True)
class Block:
    """One fenced code block: where it is, its language, its text, and whether it needs AWS."""

    path: Path
    line: int
    language: str
    text: str
    needs_aws: bool

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def documents() -> list[Path]:
    """README.md and every page under docs/ (the generated reference holds only ```text blocks)."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def blocks() -> list[Block]:
    found = []
    for path in documents():
        text = path.read_text(encoding="utf-8")
        for match in FENCE.finditer(text):
            before = text[: match.start()].rstrip().splitlines()
            needs = bool(before) and before[-1].strip() in MARKERS
            line = text.count("\n", 0, match.start()) + 1
            found.append(Block(path, line, match[1], textwrap.dedent(match[2]), needs))
    return found


def commands(block: Block) -> Iterator[tuple[list[str], str]]:
    """The block's commands as argv lists, each with the comment written beside it: continuation
    lines joined, comment lines dropped, a console block's ``$ `` prompts only."""
    text = block.text.replace("\\\n", " ")
    for raw in text.splitlines():
        line = raw.strip()
        if block.language == "console":
            if not line.startswith("$ "):
                continue
            line = line[2:]
        if not line or line.startswith("#"):
            continue
        comment = line.partition(" #")[2]
        # A pipeline or list (`a | b`, `a && b`, `a; b`) is several commands: each is checked.
        lexer = shlex.shlex(line, posix=True, punctuation_chars="|&;")
        lexer.whitespace_split = True
        lexer.commenters = "#"
        argv: list[str] = []
        for token in [*lexer, ";"]:
            if token in {"|", "||", "&&", ";", "&"}:
                if argv:
                    yield argv, comment
                argv = []
            else:
                argv.append(token)


# ---------------------------------------------------------------- parsing a command


def _parsers() -> dict[str, Callable[[list[str]], None]]:
    from deepseek_eks.automation.cli import _parser as automation_parser
    from deepseek_eks.sizing.cli import parser as sizing_parser

    def automation(argv: list[str]) -> None:
        automation_parser().parse_args(argv)

    def sizing(argv: list[str]) -> None:
        if argv[:1] == ["calibrate"]:  # its own parser (sizing/cli.py hands it over)
            from deepseek_eks.sizing.calibration import parser as calibrate_parser

            calibrate_parser().parse_args(argv[1:])
            return
        sizing_parser().parse_args(argv)

    def policy(argv: list[str]) -> None:
        if argv[:1] != ["check"] or len(argv) != 2:
            raise SystemExit(f"python -m policy takes `check FILE`, not {argv}")

    return {"automation": automation, "sizing": sizing, "policy": policy}


def module_command(argv: list[str]) -> tuple[str, list[str]] | None:
    """``("automation", [...])`` for ``python -m automation ...``; None for anything else."""
    if len(argv) >= 3 and Path(argv[0]).name in ("python", "python3") and argv[1] == "-m":
        return argv[2], argv[3:]
    return None


def parse_error(module: str, argv: list[str]) -> str | None:
    """Why ``python -m module argv`` does not parse, or None."""
    parse = _parsers().get(module)
    if parse is None:
        return f"python -m {module} is no CLI of this project"
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            parse(argv)
    except SystemExit as stop:
        if stop.code not in (0, None):
            return err.getvalue().strip() or str(stop.code)
    return None


def make_targets(argv: list[str]) -> list[str]:
    return [a for a in argv[1:] if "=" not in a and not a.startswith("-")]


def make_dry_run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    # -o .venv/.installed: the venv is this one; make must not rebuild it to print a recipe.
    # Under `make test` this is a sub-make: without the parent's MAKELEVEL/MAKEFLAGS (and with
    # --no-print-directory) it prints only the recipe, not "make[1]: Entering directory" lines.
    env = {k: v for k, v in os.environ.items() if k not in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS")}
    return subprocess.run(
        [
            "make",
            "-n",
            "--no-print-directory",
            "-o",
            ".venv/.installed",
            "-o",
            ".venv-checkov/.installed",
            *argv[1:],
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )


# ---------------------------------------------------------------- running a command


class Runner:
    """Runs each distinct offline command once; renders go to a temporary folder."""

    def __init__(self, out: Path) -> None:
        self.out = out
        self.done: dict[tuple[str, ...], subprocess.CompletedProcess[str]] = {}

    def run(self, argv: list[str]) -> subprocess.CompletedProcess[str]:
        argv = self.offline_argv(argv)
        key = tuple(argv)
        if key not in self.done:
            self.done[key] = subprocess.run(
                argv, cwd=ROOT, capture_output=True, text=True, timeout=TIMEOUT_S, stdin=subprocess.DEVNULL
            )
        return self.done[key]

    def offline_argv(self, argv: list[str]) -> list[str]:
        if argv[0] == "make":
            recipe = make_dry_run(argv).stdout.strip().splitlines()
            assert recipe, f"`{shlex.join(argv)}` prints no recipe"
            argv = shlex.split(recipe[-1])
        module = module_command(argv)
        assert module, f"not a python -m command: {argv}"
        name, rest = module
        if name == "automation" and rest[:1] == ["render"]:
            rest = [a for i, a in enumerate(rest) if a != "--out" and (i == 0 or rest[i - 1] != "--out")]
            rest += ["--out", str(self.out / "render")]
        return [sys.executable, "-m", name, *rest]


@pytest.fixture(scope="module")
def runner(tmp_path_factory: pytest.TempPathFactory) -> Runner:
    return Runner(tmp_path_factory.mktemp("doc-examples"))


def _expected_exit(comment: str) -> int:
    """The exit code a documented offline command ends with: 0, or what the comment beside it in
    the doc says (``# infeasible: exit 1``)."""
    found = re.search(r"\bexit (\d)\b", comment)
    return int(found[1]) if found else 0


# Offline commands that read a file of the reader's (a vLLM log, a resource list): parsed, not run.
READS_YOUR_FILE = {("sizing", "calibrate"), ("policy", "check")}


SHELL = [b for b in blocks() if b.language != "python"]
PYTHON = [b for b in blocks() if b.language == "python"]


def test_the_documents_hold_examples() -> None:
    """Guards the extraction itself: a broken fence pattern would pass every test below."""
    assert len(SHELL) >= 15 and len(PYTHON) >= 4, (len(SHELL), len(PYTHON))


@pytest.mark.parametrize("block", SHELL, ids=[b.where for b in SHELL])
@pytest.mark.timeout(TIMEOUT_S)  # README's `simulate --compare` takes 2-3 minutes beside another test process
def test_shell_block(block: Block, runner: Runner) -> None:
    problems = []
    for argv, comment in commands(block):
        module = module_command(argv)
        if module and (error := parse_error(*module)):
            problems.append(f"`{shlex.join(argv)}`: {error}")
            continue
        if argv[0] == "make":
            dry = make_dry_run(argv)
            if dry.returncode:
                problems.append(f"`{shlex.join(argv)}`: {dry.stderr.strip()}")
                continue
        if block.needs_aws:
            continue
        offline = (
            module is not None
            and (module[0] in ("sizing", "policy") or (module[1][:1] and module[1][0] in OFFLINE_AUTOMATION))
        ) or (argv[0] == "make" and set(make_targets(argv)) <= RUN_MAKE | {"test", "docs", "twin-build"})
        if not offline:
            problems.append(f"`{shlex.join(argv)}` needs more than this machine: mark the block {MARKER}")
            continue
        if argv[0] == "make" and not set(make_targets(argv)) <= RUN_MAKE:
            continue  # exists (dry run above); `make test` is this suite
        if module and (module[0], module[1][0] if module[1] else "") in READS_YOUR_FILE:
            continue  # parsed above
        done = runner.run(argv)
        if done.returncode != _expected_exit(comment):
            problems.append(f"`{shlex.join(argv)}` exited {done.returncode}: {done.stderr.strip()[-800:]}")
    assert not problems, f"{block.where}:\n" + "\n".join(problems)


def _imports_resolve(tree: ast.AST) -> list[str]:
    missing = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            module = importlib.import_module(node.module)
            for alias in node.names:
                if not hasattr(module, alias.name):
                    try:  # a submodule not imported yet
                        importlib.import_module(f"{node.module}.{alias.name}")
                    except ImportError:
                        missing.append(f"{node.module}.{alias.name}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                importlib.import_module(alias.name)
    return missing


@pytest.mark.parametrize("block", PYTHON, ids=[b.where for b in PYTHON])
def test_python_block(block: Block) -> None:
    tree = ast.parse(block.text, filename=block.where)
    assert not _imports_resolve(tree), f"{block.where}: {_imports_resolve(tree)}"
    code = compile(tree, block.where, "exec")
    if block.needs_aws:
        return
    namespace: dict[str, Any] = {"__name__": "doc_example"}
    if "deepseek_eks.testing" in block.text:  # brings its own tests, which call run() themselves
        exec(code, namespace)
        tests = [v for k, v in namespace.items() if k.startswith("test_") and callable(v)]
        assert tests, f"{block.where} imports deepseek_eks.testing but defines no test_* function"
        for test in tests:
            test()
        return
    from deepseek_eks.testing import run

    # A program: the placeholder stands for any secret the example reads from its stack config.
    resources = run(lambda: exec(code, namespace), config={"apiKey": "doc-example-key"})
    assert any(r.type.startswith("deepseek-eks:") for r in resources), f"{block.where} built no service"


def test_the_marker_is_needed_where_it_is_used() -> None:
    """A block marked as needing AWS holds at least one command that does (else run it)."""
    unneeded = []
    for block in SHELL:
        if not block.needs_aws:
            continue
        offline = all(
            (m := module_command(argv)) is not None
            and (m[0] in ("sizing", "policy") or (m[1][:1] and m[1][0] in OFFLINE_AUTOMATION))
            for argv, _ in commands(block)
        )
        if offline:
            unneeded.append(block.where)
    assert not unneeded, f"blocks marked {MARKER} that run offline: {unneeded}"


# ---------------------------------------------------------------- config keys the docs show
#
# Flat keys are the canonical form (the shipped stacks write `deepseek-eks:autoscaling.maxReplicas`):
# every `pulumi config set` command and every stack-file YAML the README, docs/ and the examples
# show names a real key, flat. Pulumi's nested form (`--path`, `deepseek-eks:autoscaling:` with a
# mapping) stays accepted as an equivalent; docs/configuration.md says so, once, in prose.

NESTED_FORM_PAGE = ROOT / "docs" / "configuration.md"
# Every fenced block (any language): inline code is looked for only outside them.
ANY_FENCE = re.compile(r"^[ \t]*```.*?^[ \t]*```[ \t]*$", re.S | re.M)
YAML_FENCE = re.compile(r"^[ \t]*```ya?ml[ \t]*\n(.*?)^[ \t]*```[ \t]*$", re.S | re.M)
# An inline code span, which may wrap onto the next line.
INLINE_CODE = re.compile(r"`([^`]+)`")
STACK_KEY = re.compile(r"^[ \t-]*(deepseek-eks|aws):(\S+?):(?:\s|$)", re.M)
# `pulumi config set` flags that take a value.
VALUE_FLAGS = {"--stack", "-s", "--config-file", "--cwd", "-C"}


@dataclass(frozen=True)
class ConfigSet:
    """One `pulumi config set` the docs show: where, its flags, the key and whether in a block."""

    where: str
    flags: tuple[str, ...]
    key: str
    in_block: bool


def _config_set(where: str, argv: list[str], in_block: bool) -> ConfigSet | None:
    if argv[:3] != ["pulumi", "config", "set"]:
        return None
    flags, positional, rest = [], [], iter(argv[3:])
    for token in rest:
        if token in VALUE_FLAGS:
            next(rest, None)
        elif token.startswith("-"):
            flags.append(token)
        else:
            positional.append(token)
    return ConfigSet(where, tuple(flags), positional[0] if positional else "", in_block)


def config_set_commands() -> list[ConfigSet]:
    found = [c for b in SHELL for argv, _ in commands(b) if (c := _config_set(b.where, argv, True))]
    for path in documents():
        prose = ANY_FENCE.sub("", path.read_text(encoding="utf-8"))
        for span in INLINE_CODE.findall(prose):
            if span.startswith("pulumi config set"):
                try:
                    argv = shlex.split(span)
                except ValueError:  # an unbalanced quote: take the words before it
                    argv = span.split()
                found += [c for c in [_config_set(str(path.relative_to(ROOT)), argv, False)] if c]
    return found


def _real_keys() -> set[str]:
    from deepseek_eks.settings.model import AWS_KEYS, known_keys

    return {*known_keys(), *(f"aws:{k}" for k in AWS_KEYS)}


def _key_problem(key: str) -> str | None:
    """Why a key as the docs write it is not a real, flat key (None when it is)."""
    bare = key.removeprefix("deepseek-eks:")
    if bare in _real_keys():
        return None
    if any(k.startswith(f"{bare}.") for k in _real_keys()) or "[" in bare:
        return f"`{key}` is the nested form: write the flat key (e.g. `{bare}.<setting>`)"
    return f"`{key}` is no setting of this project (docs/reference/configuration.md lists them)"


def stack_yaml_examples() -> list[tuple[str, str]]:
    """(where, text) of every stack-file YAML shown: ```yaml blocks of the docs that hold project
    or aws keys, and the shipped and example stack files themselves."""
    found = []
    for path in documents():
        text = path.read_text(encoding="utf-8")
        for match in YAML_FENCE.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            found.append((f"{path.relative_to(ROOT)}:{line}", match[1]))
    for path in sorted([*ROOT.glob("Pulumi.*.yaml"), *(ROOT / "examples").glob("*/Pulumi.*.yaml")]):
        found.append((str(path.relative_to(ROOT)), path.read_text(encoding="utf-8")))
    return found


def test_the_docs_show_config_commands_and_stack_yaml() -> None:
    """Guards the extraction: a broken pattern would pass every check below."""
    assert len(config_set_commands()) >= 8 and len(stack_yaml_examples()) >= 4


def test_every_config_set_in_the_docs_names_a_real_flat_key() -> None:
    problems = []
    for command in config_set_commands():
        if "--path" in command.flags:
            if command.in_block or Path(ROOT / command.where.split(":")[0]) != NESTED_FORM_PAGE:
                problems.append(
                    f"{command.where}: `pulumi config set --path {command.key}`: use the flat key"
                )
            continue
        if command.key and (problem := _key_problem(command.key)):  # no key: the command named
            problems.append(f"{command.where}: {problem}")
    assert not problems, "\n".join(problems)


def test_the_nested_form_is_mentioned_once_as_an_equivalent() -> None:
    mentions = [c for c in config_set_commands() if "--path" in c.flags]
    assert len(mentions) == 1 and not mentions[0].in_block, [c.where for c in mentions]
    assert "equivalent" in NESTED_FORM_PAGE.read_text(encoding="utf-8")


def test_every_stack_yaml_example_uses_real_flat_keys() -> None:
    problems = []
    for where, text in stack_yaml_examples():
        for namespace, name in STACK_KEY.findall(text):
            key = f"aws:{name}" if namespace == "aws" else name
            if problem := _key_problem(key):
                problems.append(f"{where}: {problem}")
    assert not problems, "\n".join(problems)


def test_the_documented_flat_list_forms_mean_what_the_page_says(tmp_path: Path) -> None:
    """docs/configuration.md: a list setting from `pulumi config set` is one string (one item,
    comma-separated items, or a flow list), and its YAML example is a list: all read alike.
    `pulumi config set KEY VALUE` without --path stores VALUE as the string of a flat key."""
    from deepseek_eks.automation.stackfile import read_stack
    from deepseek_eks.settings import parse_settings

    page = NESTED_FORM_PAGE.read_text(encoding="utf-8")
    stack_yaml = next(m[1] for m in YAML_FENCE.finditer(page) if "deepseek-eks:" in m[1])
    forms = {"the page's YAML": stack_yaml}
    for command in (c for c in config_set_commands() if c.where.startswith("docs/configuration.md")):
        if command.key in ("gpu.instanceFamilies", "cluster.publicAccessCidrs") and command.in_block:
            block = next(b for b in SHELL if b.where == command.where)
            value = next(a[4] for a, _ in commands(block) if a[3:4] == [command.key])
            forms[f"pulumi config set {command.key} {value}"] = (
                f"config:\n  deepseek-eks:{command.key}: {json.dumps(value)}\n"
            )
    forms["a flow list"] = 'config:\n  deepseek-eks:gpu.instanceFamilies: \'["g6e", "p5"]\'\n'
    (tmp_path / "Pulumi.yaml").write_text((ROOT / "Pulumi.yaml").read_text(encoding="utf-8"))
    read = {}
    for name, text in forms.items():
        (tmp_path / "Pulumi.t.yaml").write_text(text)
        config = read_stack("t", tmp_path)
        settings = parse_settings(config.values, config.secret_keys, "t")
        read[name] = (settings.gpu.instance_families, settings.cluster.public_access_cidrs)
    yaml_families, yaml_cidrs = read.pop("the page's YAML")
    assert len(yaml_families) == 2 and yaml_cidrs, "the page's YAML example sets both lists"
    for name, (families, cidrs) in read.items():
        if "instanceFamilies" in name or name == "a flow list":
            assert families == yaml_families, name
        else:
            assert cidrs == yaml_cidrs, name
    assert len(read) == 3, sorted(read)
