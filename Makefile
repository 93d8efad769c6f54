# Two commands set everything up and run it:
#   make repro   virtualenv + install + params.yaml from workbench/conf/ + dvc repro (the embedded default)
#   make test    virtualenv + install (with dev extras) + the whole test suite (make test-fast: unit tests only)
# make check recomputes the claims' stages (dvc repro -f, no notebook) and checks every claim against the committed one;
# make check-ci does make repro then make check on the ci profile (minutes) in scratch/ci-check (CI runs it).
# Also: make lab (JupyterLab on the notebooks), make notebooks (their .ipynb, for papermill),
# make metrics [REV=HEAD~1] (the verdict counts, or what a change did to them), make params,
# make calibrate, make het-long, make bench, make lint (ruff + mypy), make clean,
# make signals (the signal and interrupt tests, ROUNDS times, with Ctrl-C ignored and not),
# make torchrec (TorchRec 1.8.0 on the CPU fbgemm-gpu-cpu 1.8.0; make test installs it too).

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   ?= .venv
BIN    := $(VENV)/bin
PY     := $(BIN)/python
# pytest workers: 2 cores here and in CI.
JOBS   ?= 2

.PHONY: repro check check-ci claim metrics test test-fast signals screenshots lab notebooks params calibrate het-long install install-dev torchrec bench lint clean

$(BIN)/activate:
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

$(VENV)/.installed: $(BIN)/activate pyproject.toml
	$(PY) -m pip install --quiet -e .
	touch $@

$(VENV)/.installed-dev: $(VENV)/.installed-torchrec
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $@

# TorchRec beside the pinned torch (pyproject.toml's torchrec extra says why): the extra (the CPU
# fbgemm-gpu-cpu 1.8.0 and torchrec's other dependencies), then torchrec 1.8.0 without its
# dependencies (they name the CUDA fbgemm-gpu), then the check that the pair is fbgemm's own.
$(VENV)/.installed-torchrec: $(VENV)/.installed
	$(PY) -m pip install --quiet -e '.[torchrec]'
	$(PY) -m pip install --quiet --no-deps "$$($(PY) -m workbench.utils.torchrec --pin)"
	$(PY) -m workbench.utils.torchrec
	touch $@

install: $(VENV)/.installed-torchrec
install-dev: $(VENV)/.installed-dev
torchrec: $(VENV)/.installed-torchrec

params: install
	$(PY) -m workbench.config dump -o params.yaml

# DVC needs a git repository; a source tarball without one gets a fresh one here.
repro: params
	@test -d .git || git init -q
	@test -d .dvc || $(BIN)/dvc init -q
	$(PY) -m workbench.utils.dvc_lock
	PATH="$(abspath $(BIN)):$$PATH" $(PY) -m workbench.repro

# Reproduce and check: recompute every stage a claim is measured from (dvc repro -f of the
# register's measured_by stages and what they depend on, the paper-scale replays included; no
# notebook runs), measure every claim from results/ (workbench/claims) and report, claim by
# claim, whether the recomputed value lies inside the committed 95% interval and whether any
# state changed (exit 1 if one did).
check: params
	@mkdir -p scratch
	cp reports/claims.csv scratch/claims.committed.csv
	@test -d .dvc || $(BIN)/dvc init -q
	$(PY) -m workbench.utils.dvc_lock
	PATH="$(abspath $(BIN)):$$PATH" $(PY) -m workbench.repro --claims
	$(PY) -m workbench.claims.check --committed scratch/claims.committed.csv --params params.yaml

# make check on the ci profile, in a project of its own (scratch/ci-check/project, replaced; this
# tree's results/ and reports/ untouched): a copy of the sources built as make calibrate,
# make het-long and make repro build a clone, its claims table taken as the committed one, then
# `make check` there (workbench/ci_project.py). About 15 minutes on 2 cores; CI runs it.
check-ci: install
	$(PY) -m workbench.ci_project

# Reproduce one claim (reports/costs.md lists each claim's command and cost): every stage behind
# it, forced, then that claim measured and judged against the committed report.
# KEY reaches the runner through the environment, never pasted into the recipe's shell.
export KEY
claim: params
	@test -n "$$KEY" || { echo "usage: make claim KEY=<claim key> (reports/costs.md lists them)"; exit 2; }
	@test -d .dvc || $(BIN)/dvc init -q
	$(PY) -m workbench.utils.dvc_lock
	PATH="$(abspath $(BIN)):$$PATH" $(PY) -m workbench.repro --claim "$$KEY"

# Re-measure this machine's compute and software costs (results/calibration, a frozen DVC stage
# that `dvc repro` never reruns by itself; it reads the preprocessed datasets' shapes, so their
# preprocess stages run first), record them in dvc.lock; the next `make repro` reruns
# every timed stage on the new calibration.
calibrate: params
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/dvc repro --glob 'preprocess@*'
	$(PY) -m workbench.stages calibrate --params params.yaml
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/dvc commit -f calibrate

# Recompute HET's long training runs (results/het_long, a frozen DVC stage: about an hour on 2
# cores) on their own dataset (data/processed/synthetic_long, 11.4M generated rows, prepared here)
# and record them in dvc.lock; the next `make repro` redraws what reads them.
het-long: params
	$(PY) -m workbench.stages prepare dataset=synthetic_long
	$(PY) -m workbench.stages het-long --params params.yaml
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/dvc commit -f het_long

# The contributor's loop: every module's unit tests, without the ci pipeline's build, notebooks,
# the browser, network namespaces or the other slow end-to-end tests (under 3 minutes on 2 cores).
FAST := not slow and not notebook and not browser and not pipeline and not netns
test-fast: install-dev
	$(BIN)/pytest -n $(JOBS) -q -m "$(FAST)" --durations=10

# (pytest prints the 15 slowest tests at the end: where the suite's time goes)
test: install-dev
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/pytest -n $(JOBS) -q --durations=15

# The README's and the docs home's screenshots, retaken by the real-browser test (JupyterLab in
# chromium on the ci pipeline's results): esd after Run All and after a widget change.
SHOTS = scratch/screenshots
screenshots: install-dev
	rm -rf $(SHOTS)
	WORKBENCH_BROWSER_OUT="$(abspath $(SHOTS))" $(BIN)/pytest -q -p no:cacheprovider \
	  tests/test_browser.py -k "run_all_then and esd"
	cp $(SHOTS)/esd_run_all.png $(SHOTS)/esd_widget_change.png docs/images/

# The signal and interrupt tests, ROUNDS times under -n $(JOBS), each round once with Ctrl-C
# ignored by the shell that starts it (as a background job's children have it): a flaky one shows.
ROUNDS ?= 3
signals: install-dev
	for i in $$(seq $(ROUNDS)); do \
	  $(BIN)/pytest -n $(JOBS) -q -p no:cacheprovider tests/test_user_traps_interrupts.py tests/test_repro.py || exit 1; \
	  (trap '' INT; $(BIN)/pytest -n $(JOBS) -q -p no:cacheprovider tests/test_user_traps_interrupts.py tests/test_repro.py) || exit 1; \
	done

# The notebooks live in git as jupytext percent scripts (notebooks/*.py); JupyterLab and papermill
# want .ipynb: each is converted (gitignored) when its script is newer, keeping its outputs, e.g.
#   make notebooks
#   cd notebooks && ../.venv/bin/papermill esd.ipynb ../scratch/esd.ipynb -p bandwidth_spread 100
# A notebook run by hand writes into scratch/ (gitignored), never into the committed reports/.
NOTEBOOKS := $(patsubst %.py,%.ipynb,$(wildcard notebooks/*.py))

notebooks: $(NOTEBOOKS)
	@mkdir -p scratch

notebooks/%.ipynb: notebooks/%.py $(VENV)/.installed
	$(BIN)/jupytext --to ipynb --update $<

lab: install notebooks
	$(BIN)/jupyter lab notebooks/

# Every benchmark at its defaults (JSON in benchmarks/results/), then one committed record of the
# run, benchmarks/results/<date>-<machine>.json, and docs/benchmarks.md's table from the newest
# record (benchmarks/record.py): 14 min 7 s on a 2-core AMD
# EPYC (issue 48, the plain pandas and DuckDB scripts beside the preprocess stage included); the
# preprocess scaling at 1M and 2M rows only (its default goes to 45M rows: 11 GB of inputs and
# most of an hour, run it by hand). benchmarks/plain_preprocess.py is not a benchmark of its
# own: it is the pandas and DuckDB scripts preprocess_scaling.py runs beside the stage.
# The ESD ranking benchmark reads the esd stage's dataset: DVC brings it up to date first.
$(VENV)/.installed-bench: $(VENV)/.installed
	$(PY) -m pip install --quiet -e '.[bench]'
	touch $@

bench: install params $(VENV)/.installed-bench
	@start=$$(date +%s); PATH="$(abspath $(BIN)):$$PATH" $(BIN)/dvc repro -q \
	  preprocess@$$($(PY) -c "from workbench.config import load; print(load().experiments.esd.dataset)") \
	  || exit 1; for b in benchmarks/*.py; do \
	  case $$b in *plain_preprocess.py|*record.py) continue;; \
	    *preprocess_scaling.py) args="--sizes 1000000 2000000";; *) args="";; esac; \
	  echo "== $$b $$args"; $(PY) $$b $$args || exit 1; \
	done; echo "make bench: $$(( $$(date +%s) - start )) s"; \
	$(PY) benchmarks/record.py --since $$start --seconds $$(( $$(date +%s) - start )) && \
	$(PY) benchmarks/record.py --docs

# The verdict counts and each claim's value as short tables (reports/claims_metrics.json, the
# report's DVC metrics); REV=HEAD~1: the counts before -> after and each claim that changed, or
# "no change"
metrics: install
	@$(PY) -m workbench.claims.metrics_view $(if $(REV),--diff $(REV))

# Linter and type checker (versions pinned in the dev extra, configured in pyproject.toml).
lint: install-dev
	$(BIN)/ruff check workbench tests benchmarks
	$(BIN)/mypy

clean:
	rm -rf data/raw data/processed .dvc/cache .dvc/tmp

# The documentation site from docs/ (mkdocs.yml; pinned in the dev extra) with warnings as errors
# (broken links, missing pages, docstring warnings), into site/ (gitignored). The API reference is
# generated from the docstrings on every build. NO_MKDOCS_2_WARNING silences Material's notice.
.PHONY: docs
docs: install-dev
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict -d site
