# Every target creates the virtualenv first, so each works on a fresh clone.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STACK  ?= dev
OUT    ?= build/rendered
# Test processes for `make test` (pytest-xdist); `TEST_JOBS=auto` takes one per CPU. On 2 cores two
# take the suite from 53-65 minutes to about 35 (README): much of it waits on the twin's programs.
TEST_JOBS ?= 2

.PHONY: venv checkov-venv docs-venv docs generate render plan urns urns-update pins test lint typecheck check clean twin twin-build twin-capacity twin-loop

# Every dependency from its hash-locked transitive set (tools/lock_requirements.py), then the project
# itself, editable: pip refuses an editable requirement in hash-checking mode, so it goes alone.
$(VENV)/.installed: requirements-lock.txt requirements.txt requirements-pins.txt requirements-dev.txt pyproject.toml setup.py
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check --require-hashes -r requirements-lock.txt
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
	touch $@

venv: $(VENV)/.installed ## create .venv: pinned runtime and test dependencies, and the project itself (editable)

# checkov lives in its own venv: its many pinned dependencies would fight the program's.
CHECKOV_VENV := .venv-checkov
$(CHECKOV_VENV)/.installed: requirements-checkov.txt
	$(PYTHON) -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/python -m pip install --quiet --disable-pip-version-check --require-hashes -r requirements-checkov.txt
	touch $@

checkov-venv: $(CHECKOV_VENV)/.installed ## create .venv-checkov for the security scan

# MkDocs lives in its own venv too: the site's tools are no dependency of the program or its tests.
DOCS_VENV := .venv-docs
$(DOCS_VENV)/.installed: requirements-docs.txt
	$(PYTHON) -m venv $(DOCS_VENV)
	$(DOCS_VENV)/bin/python -m pip install --quiet --disable-pip-version-check --require-hashes -r requirements-docs.txt
	touch $@

docs-venv: $(DOCS_VENV)/.installed ## create .venv-docs for the documentation site

docs: venv docs-venv ## the generated reference pages are current, then the site (strict: broken links fail) into build/site
	$(PY) tools/generate_docs.py --check
	$(DOCS_VENV)/bin/mkdocs build --strict --quiet

render: venv ## offline render of STACK (default dev) into OUT/STACK
	$(PY) -m automation render --stack $(STACK) --out $(OUT)

plan: venv ## the sizing plan of STACK
	$(PY) -m automation plan --stack $(STACK)

urns: venv ## check every stack's resource URNs against tests/snapshots (upgrade safety)
	$(PY) -m automation urns

urns-update: venv ## rewrite tests/snapshots after a reviewed URN change (commit the diff)
	$(PY) -m automation urns --update

pins: venv ## every pinned version with its upstream source; fails when reference data lags
	$(PY) -m automation pins

test: venv checkov-venv ## the whole test suite, on TEST_JOBS processes (default 2)
	$(PY) -m pytest -n $(TEST_JOBS)

twin-build: ## build the twin's binaries from the Go module proxy (once; cached outside the tree)
	twin/build.sh
	twin/build.sh kube-controller-manager kube-scheduler kwok karpenter-kwok network-policy-controller lws coredns
	twin/build.sh prometheus-adapter keda-operator keda-metrics-apiserver prometheus promtool
	twin/build-engine.sh

twin: venv twin-build ## build the twin, judge every render against it, run stacks through the real engine
	DEEPSEEK_EKS_REQUIRE_TOOLS=1 DEEPSEEK_EKS_REQUIRE_ENGINE=1 DEEPSEEK_EKS_REQUIRE_SEAMS=1 DEEPSEEK_EKS_REQUIRE_LWS=1 $(PY) -m pytest -q tests/twin tests/engine

twin-capacity: venv ## capacity: the real Karpenter (kwok provider) on dev's and prod's NodePools (docs/verification-twin.md)
	twin/build.sh etcd kube-apiserver kube-controller-manager kube-scheduler kwok karpenter-kwok lws
	DEEPSEEK_EKS_REQUIRE_CAPACITY=1 $(PY) -m pytest -q tests/twin/test_capacity.py tests/twin/test_capacity_karpenter.py

twin-loop: venv ## the autoscaling loop end to end for dev, prod, r1, dev on gpu-utilization and dev waking from zero (docs/verification-twin.md; root, Prometheus)
	twin/build.sh etcd kube-apiserver kube-controller-manager kube-scheduler kwok karpenter-kwok network-policy-controller lws
	twin/build.sh prometheus-adapter keda-operator keda-metrics-apiserver prometheus promtool
	DEEPSEEK_EKS_REQUIRE_LOOP=1 DEEPSEEK_EKS_REQUIRE_LWS=1 DEEPSEEK_EKS_LOOP_ALL=1 $(PY) -m pytest -q tests/twin/test_loop.py

lint: venv ## ruff, and every generated file current (make generate rewrites them)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) tools/generate_settings.py --check
	$(PY) tools/generate_schema.py --check
	$(PY) tools/generate_docs.py --check

generate: venv ## rewrite what is generated from each setting's one declaration (settings/model.py): args types, Pulumi.yaml config, schema, reference docs
	$(PY) tools/generate_settings.py
	$(PY) tools/generate_schema.py
	$(PY) tools/generate_docs.py

typecheck: venv ## mypy over the package as the wheel lays it out (tools/typecheck.py), reported at the checkout's paths
	$(PY) tools/typecheck.py

check: lint typecheck test ## everything CI runs

clean:
	rm -rf build .pytest_cache .mypy_cache .ruff_cache .hypothesis
