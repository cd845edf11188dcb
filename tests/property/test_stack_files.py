"""Property: any stack file, valid or not, in either Pulumi config form, hostile or not, gives
exit 0 with every set value in plan.json or the settings the render is built from, or exit 2
with a message naming each bad key; never a traceback, a hang, a secret or ciphertext.

``python -m automation plan`` runs in-process (``main()`` with captured output): the render
builds from the same reader and settings (tests/unit/test_stackfile.py renders both forms)."""

from __future__ import annotations

import io
import json
import tempfile
import time
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from automation.cli import main
from automation.stackfile import read_stack
from deepseek_eks.settings import parse_settings

ROOT = Path(__file__).resolve().parents[2]
SECRET = "sk-live-NEVER-PRINT-0042"
CIPHERTEXT = "v1:Q0lQSEVSVEVYVC1ORVZFUi1QUklOVA=="


@dataclass(frozen=True)
class Entry:
    """One setting written into the stack file: its YAML text and, for a bad one, what the
    error must name and at which stage it is caught (yaml: the file, settings: the values)."""

    key: str  # group.field or a scalar name, in the project namespace unless it has a ':'
    text: str
    bad: str | None = None  # the text the error output must contain
    stage: str = "settings"


VALID = {
    "model.variant": ["r1-distill-qwen-1.5b", "r1-distill-qwen-7b", "r1-distill-llama-8b"],
    "model.maxModelLen": ["4096", "16384"],
    "autoscaling.signal": ["gpu-utilization", "combined", "queue-depth"],
    "autoscaling.maxReplicas": ["2", "3", "6"],
    "gpu.instanceFamilies": ["[g6]", "[g6, g6e]", "[g5, g6]"],
    "gpu.capacityTypes": ["[on-demand]", "[spot, on-demand]"],
    "observability.grafana": ["true", "false"],
    "aws:region": ["us-east-1", "us-west-2"],
    "apiKey": [f"{{secure: '{CIPHERTEXT}'}}"],  # a secret where one belongs: accepted, never shown
    "awsx:vpc": ["anything"],  # another provider's namespace: not ours to judge
}
INVALID = [
    Entry("model.variant", "r1-distill-qwen-3b", "deepseek-eks:model.variant"),
    Entry("model.variant", "2024-01-01", "deepseek-eks:model.variant", "yaml"),
    Entry("autoscaling.maxReplicas", "1" + "0" * 30, "deepseek-eks:autoscaling.maxReplicas"),
    Entry("autoscaling.maxReplicas", "'١٠'", "deepseek-eks:autoscaling.maxReplicas"),
    Entry("autoscaling.maxReplicas", "010", "deepseek-eks:autoscaling.maxReplicas", "yaml"),
    Entry("autoscaling.maxReplicas", "1:30", "deepseek-eks:autoscaling.maxReplicas", "yaml"),
    Entry("gpu.instanceFamilies", "[g4]", "deepseek-eks:gpu.instanceFamilies"),
    Entry("gpu.instanceFamilies", "!!set {g6}", "deepseek-eks:gpu.instanceFamilies", "yaml"),
    Entry("network.vpcCidr", "fd00::/16", "deepseek-eks:network.vpcCidr"),
    Entry("network.vpcCidr", "10.42.0.0", "deepseek-eks:network.vpcCidr"),
    Entry("observability.grafana", "yes", "deepseek-eks:observability.grafana", "yaml"),
    Entry("aws:region", "us-east-١", "aws:region"),
    Entry("aws:secretKey", SECRET, "aws:secretKey"),
    Entry("deepseek_eks:apiKey", SECRET, "deepseek_eks:apiKey"),
    Entry("DeepSeek-EKS:hfToken", f"{{secure: '{CIPHERTEXT}'}}", "DeepSeek-EKS:hfToken"),
    Entry("api_key", SECRET, "deepseek-eks:api_key"),
    Entry("grafanaAdminPasword", f"{{secure: '{CIPHERTEXT}'}}", "deepseek-eks:grafanaAdminPasword"),
    Entry("model.hfToken", SECRET, "deepseek-eks:model.hfToken"),
    Entry("apiKey", SECRET, "deepseek-eks:apiKey"),  # plaintext where a secret is required
]
# Whole-file hostility: appended after config, caught while reading the YAML.
HOSTILE_TAILS = {
    "alias bomb": "\n".join(
        ['b0: &b0 ["lol","lol","lol","lol","lol","lol","lol","lol"]']
        + [f"b{i}: &b{i} [" + ", ".join([f"*b{i - 1}"] * 8) + "]" for i in range(1, 9)]
    ),
    "deep nesting": "deep: " + "[" * 3000 + "]" * 3000,
    "syntax error": "broken: [a, b",
    "duplicate": "config: {}",
}


def _full(key: str) -> str:
    return key if ":" in key else f"deepseek-eks:{key}"


@st.composite
def stack_files(draw: st.DrawFn) -> tuple[str, list[Entry], dict[str, str]]:
    chosen = draw(st.dictionaries(st.sampled_from(sorted(VALID)), st.none(), max_size=len(VALID)))
    entries = {key: Entry(key, draw(st.sampled_from(VALID[key]))) for key in chosen}
    for bad in draw(st.lists(st.sampled_from(INVALID), max_size=3, unique_by=lambda e: e.key)):
        entries[bad.key] = bad
    path_groups = draw(st.sets(st.sampled_from(["model", "autoscaling", "gpu", "observability", "network"])))
    lines = ["config:"]
    grouped: dict[str, list[Entry]] = {}
    for entry in entries.values():
        group, _, field = entry.key.partition(".")
        if ":" not in entry.key and field and group in path_groups:
            grouped.setdefault(group, []).append(entry)
        else:
            lines.append(f"  {_full(entry.key)}: {entry.text}")
    for group, members in grouped.items():  # the `pulumi config set --path` form
        lines.append(f"  deepseek-eks:{group}:")
        lines += [f"    {e.key.partition('.')[2]}: {e.text}" for e in members]
    tail = draw(st.sampled_from([None, None, None, *HOSTILE_TAILS]))
    if tail:
        lines.append(HOSTILE_TAILS[tail])
        entries["(file)"] = Entry("(file)", "", "Pulumi.p.yaml", "file")
    return (
        "\n".join(lines) + "\n",
        list(entries.values()),
        {e.key: e.text for e in entries.values() if not e.bad},
    )


def _run(project_dir: Path) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            code = main(["--project-dir", str(project_dir), "plan", "--stack", "p", "--json"])
        except SystemExit as e:  # argparse only; anything else is a crash and fails the test
            code = int(e.code or 0)
    return code, out.getvalue() + err.getvalue()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stack_files())
def test_any_stack_file_means_what_it_says_or_is_refused_by_key(case) -> None:
    text, entries, valid = case
    with tempfile.TemporaryDirectory() as tmp:
        project_dir = Path(tmp)
        (project_dir / "Pulumi.yaml").write_text((ROOT / "Pulumi.yaml").read_text())
        (project_dir / "Pulumi.p.yaml").write_text(text)
        start = time.monotonic()
        code, output = _run(project_dir)
        assert time.monotonic() - start < 10, "no hang"
        assert "Traceback" not in output and SECRET not in output and CIPHERTEXT not in output
        assert "Q0lQSEVS" not in output and len(output) < 20_000
        bad = [e for e in entries if e.bad]
        if bad:
            assert code == 2, output
            # The first stage that fails reports all of its problems: the file's structure, then
            # its values as YAML, then the settings.
            stage = next(s for s in ("file", "yaml", "settings") if any(e.stage == s for e in bad))
            for entry in bad:
                if entry.stage == stage:
                    assert entry.bad in output, (entry, output)
            return
        if code == 1:
            assert "No feasible plan" in output
            return
        assert code == 0, output
        # The plan is the JSON document on stdout; warnings (stderr) follow it in ``output``.
        plan, _ = json.JSONDecoder().raw_decode(output, output.index("{"))
        config = read_stack("p", project_dir)
        s = parse_settings(config.values, config.secret_keys, "p")
    expected_plan = {
        "model.variant": ("variant", str),
        "model.maxModelLen": ("max_model_len", int),
        "autoscaling.maxReplicas": ("max_replicas", int),
        "aws:region": ("region", str),
    }
    for key, (field, kind) in expected_plan.items():
        if key in valid:
            assert plan[field] == kind(valid[key]), (key, plan[field])
    if "gpu.capacityTypes" in valid:
        assert plan["capacity_types"] == [
            c.strip() for c in valid["gpu.capacityTypes"].strip("[]").split(",")
        ]
    if "gpu.instanceFamilies" in valid:
        assert s.gpu.instance_families == [
            f.strip() for f in valid["gpu.instanceFamilies"].strip("[]").split(",")
        ]
    if "autoscaling.signal" in valid:
        assert s.autoscaling.signal.value == valid["autoscaling.signal"]
    if "observability.grafana" in valid:
        assert s.observability.grafana is (valid["observability.grafana"] == "true")


GROUPED = {
    "model.variant": ["r1-distill-qwen-1.5b", "r1-distill-llama-8b"],
    "autoscaling.signal": ["gpu-utilization", "queue-depth", "combined"],
    "autoscaling.maxReplicas": ["2", "4", "7"],
}


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.fixed_dictionaries({key: st.sampled_from(values) for key, values in GROUPED.items()}),
    st.sets(st.sampled_from(["model", "autoscaling"])),
)
def test_rendered_stack_reflects_every_value_in_either_form(values: dict[str, str], groups: set[str]) -> None:
    """The full render (mock engine) of a generated stack file: the values reach the objects."""
    lines = ["config:"]
    for group in ("model", "autoscaling"):
        members = {k.partition(".")[2]: v for k, v in values.items() if k.startswith(f"{group}.")}
        if group in groups:  # the --path form
            lines += [f"  deepseek-eks:{group}:", *(f"    {f}: {v}" for f, v in members.items())]
        else:
            lines += [f"  deepseek-eks:{group}.{f}: {v}" for f, v in members.items()]
    with tempfile.TemporaryDirectory() as tmp:
        project_dir = Path(tmp)
        (project_dir / "Pulumi.yaml").write_text((ROOT / "Pulumi.yaml").read_text())
        (project_dir / "Pulumi.p.yaml").write_text("\n".join(lines) + "\n")
        out, err = io.StringIO(), io.StringIO()
        with redirect_stdout(out), redirect_stderr(err):
            code = main(["--project-dir", tmp, "render", "--stack", "p", "--out", f"{tmp}/out"])
        assert code == 0, err.getvalue()
        root = project_dir / "out" / "p"
        plan = json.loads((root / "plan.json").read_text())
        objects = [yaml.safe_load(p.read_text()) for p in (root / "kubernetes").glob("*.yaml")]
    assert plan["variant"] == values["model.variant"]
    scalers = [o for o in objects if o["kind"] in ("HorizontalPodAutoscaler", "ScaledObject")]
    signal = values["autoscaling.signal"]
    assert {o["kind"] for o in scalers} == (
        {"HorizontalPodAutoscaler"} if signal == "gpu-utilization" else {"ScaledObject"}
    )
    for scaler in scalers:
        spec = scaler["spec"]
        assert spec.get("maxReplicas", spec.get("maxReplicaCount")) == int(values["autoscaling.maxReplicas"])


_SCALARS = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
)
_NAMES = st.sampled_from(["model", "model.variant", "gpu.instanceFamilies", "apiKey", "region", "a.b"])
_NAMESPACES = st.sampled_from(["deepseek-eks:", "aws:", "deepseek_eks:", "x:", ""])
_KEYS = st.builds(lambda ns, name: ns + name, _NAMESPACES, _NAMES) | st.text(max_size=16)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(_KEYS, _VALUES, max_size=6) | st.text(max_size=200))
def test_arbitrary_config_is_read_or_refused_never_crashes(config) -> None:
    """Any YAML document, or any text, as a stack file: read or refused with exit 2, no crash."""
    text = yaml.safe_dump({"config": config}) if isinstance(config, dict) else config
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "Pulumi.yaml").write_text((ROOT / "Pulumi.yaml").read_text())
        (Path(tmp) / "Pulumi.p.yaml").write_text(text, encoding="utf-8", errors="surrogatepass")
        code, output = _run(Path(tmp))
    assert code in (0, 1, 2), output
    assert "Traceback" not in output


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(_KEYS, _VALUES | _VALUES.map(json.dumps), max_size=6), st.sets(_KEYS, max_size=3))
def test_any_engine_config_map_gives_settings_or_settings_error(config, secret_keys) -> None:
    """The runtime path: whatever map the engine hands the program, typed or as JSON text."""
    from deepseek_eks.settings import SettingsError

    try:
        parse_settings(config, secret_keys)
    except SettingsError as e:
        assert e.problems and all(str(p).split(":", 1)[0] for p in e.problems)
