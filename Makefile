# Four commands: `make lab` opens the series, `make test` runs everything CI runs, `make check`
# is the fast tier for the edit-test loop, `make bench` measures the speed claims. Each creates
# .venv and installs on first use.

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PYTEST_ARGS ?=

.PHONY: install lab test check test-unit test-notebooks test-notebooks-stressed bench clean

install: $(STAMP)

$(STAMP): requirements.txt pyproject.toml
	@$(PYTHON) -c 'import sys; v = sys.version_info[:2]; \
	  sys.exit(0 if (3, 10) <= v <= (3, 12) else f"rlkit needs Python 3.10-3.12, found {sys.version.split()[0]}. Fix: make PYTHON=python3.11 ...")'
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	@# JupyterLab's jsonschema[format-nongpl] pulls rfc3987-syntax, which compiles a grammar at
	@# import: +2.5 s to every `import ray`, so to every Ray worker start. jsonschema treats it as
	@# optional (it only checks the "iri" string format), so we remove it.
	$(PY) -m pip uninstall --quiet --yes rfc3987-syntax
	@# minatar (GPL-3.0) is a test tool, not a dependency: only tests/test_breakout.py imports
	@# it, to check rlkit's own Breakout-MinAtar (MIT, rlkit/envs/breakout.py) against the
	@# original frame by frame. --no-deps: its Environment needs numpy alone (the pandas, scipy
	@# and seaborn it lists serve plotting we do not use).
	$(PY) -m pip install --quiet --no-deps minatar==1.0.15
	@# ale-py (GPL-2.0, Atari ROMs in its wheel) is optional too: rlkit imports it only when an
	@# Atari id ("Atari/Pong-v5") is built (rlkit/envs/atari.py), as gymnasium's [atari] extra
	@# does; tests/test_atari.py and benchmarks/pong.py use it. Its one dependency is numpy.
	$(PY) -m pip install --quiet --no-deps ale-py==0.12.1
	touch $(STAMP)

# JupyterLab refuses to run as root (containers often do) unless told; it listens on localhost only.
lab: $(STAMP)
	$(VENV)/bin/jupyter lab notebooks/ $(if $(filter 0,$(shell id -u)),--allow-root)

# Unit tests, then every notebook top to bottom under nbval (assert cells must pass); the 15
# slowest tests are listed at the end, so the next person sees where the time goes.
# Two test files at a time (pytest-xdist, --dist loadfile: a notebook's cells stay in order in one
# kernel, a module's fixtures in one process). One stream leaves cores idle while Ray starts
# actors, waits and times out (test_faults and test_resume alone kept 1.64 of 2 cores busy); two
# kept 1.92 busy over the whole suite, whose tests took 29.0 and 33.7 min in two runs instead
# of 36.4 and 37.9 (Intel Xeon 2-core VM, 2026-11-28). Every timing check already holds
# beside a busy process (the stressed runs below). TEST_WORKERS=1 runs one file at a time; more
# than 2 on a 2-core machine gains nothing.
TEST_WORKERS ?= 2
test: $(STAMP)
	$(PY) -m pytest tests notebooks --nbval-lax --nbval-current-env \
	  --nbval-cell-timeout=900 -p no:cacheprovider --durations=15 \
	  -n $(TEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

# The fast tier: every test of tests/ that starts no Ray and trains nothing for real, plus one
# short Ray run (marked smoke). Tests that use a Ray fixture are marked ray by tests/conftest.py.
check: $(STAMP)
	$(PY) -m pytest tests -m "smoke or not (ray or slow)" -q -p no:cacheprovider $(PYTEST_ARGS)

test-unit: $(STAMP)
	$(PY) -m pytest tests -p no:cacheprovider $(PYTEST_ARGS)

test-notebooks: $(STAMP)
	$(PY) -m pytest notebooks --nbval-lax --nbval-current-env --nbval-cell-timeout=900 \
	  -p no:cacheprovider $(PYTEST_ARGS)

# The notebooks on a machine unlike ours: STRESS=busy runs them beside one busy process at normal
# priority (a core taken, as a laptop's browser takes one); STRESS=pinned runs them pinned to one
# core (taskset -c 0: twice as slow, with another balance). NOTEBOOKS picks some, e.g.
# NOTEBOOKS="notebooks/06_impala_vtrace.ipynb".
STRESS ?= busy
NOTEBOOKS ?= notebooks
test-notebooks-stressed: $(STAMP)
	@case "$(STRESS)" in busy|pinned) ;; *) echo "STRESS=$(STRESS): use STRESS=busy or STRESS=pinned" >&2; exit 2;; esac
	@if [ "$(STRESS)" = busy ]; then \
	  $(PY) -c 'while True: pass' & hog=$$!; trap "kill $$hog" EXIT; \
	  $(PY) -m pytest $(NOTEBOOKS) --nbval-lax --nbval-current-env --nbval-cell-timeout=1800 \
	    -p no:cacheprovider --durations=0 $(PYTEST_ARGS); \
	else \
	  taskset -c 0 $(PY) -m pytest $(NOTEBOOKS) --nbval-lax --nbval-current-env \
	    --nbval-cell-timeout=1800 -p no:cacheprovider --durations=0 $(PYTEST_ARGS); \
	fi

bench: $(STAMP)
	$(PY) -m benchmarks.run_all $(BENCH_ARGS)

clean:
	rm -rf $(VENV) results .pytest_cache
