# winsample — `make demo` and `make test` work from a fresh clone with only Python >= 3.11 and make.
.DELETE_ON_ERROR:
.PHONY: demo test lint bench docs clean venv

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
WS     := $(VENV)/bin/winsample
DEMO   := build/demo

# Stamp files: reinstall only when the package's build inputs change (winsample/_fast.c is the
# optional C module, built in place; the old one goes first, so a failed build cannot leave it).
$(VENV)/.base: pyproject.toml setup.py winsample/_fast.c
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "winsample needs Python >= 3.11"'
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	rm -f winsample/_fast.*.so winsample/_fast.*.pyd
	$(PY) -m pip install -q --disable-pip-version-check -e '.[plot,fast,hf,sentencepiece,chat]'  # plot: the demo draws coverage.png; fast: gigatoken; hf, sentencepiece: every --tokenizer-file family; chat: encode --chat (Jinja2)
	touch $@

$(VENV)/.test: pyproject.toml $(VENV)/.base
	$(PY) -m pip install -q --disable-pip-version-check -e '.[test]'
	touch $@

$(VENV)/.bench: pyproject.toml $(VENV)/.test
	$(PY) -m pip install -q --disable-pip-version-check -e '.[test,bench]'
	touch $@

venv: $(VENV)/.base

demo: $(VENV)/.base
	rm -rf $(DEMO)
	$(WS) encode winsample/corpus -o $(DEMO)/data
	$(WS) windows $(DEMO)/data/train.bin -T 256 --boundaries paragraph -o $(DEMO)/train.plan.npy
	$(WS) verify $(DEMO)/data --plan $(DEMO)/train.plan.npy --show 3 --plot $(DEMO)/coverage.png
	@echo
	@echo "demo outputs in $(DEMO)/:"
	@ls -l $(DEMO) $(DEMO)/data

lint: $(VENV)/.test
	$(VENV)/bin/ruff check winsample tests

test: $(VENV)/.test lint
	$(PY) -m pytest -q

bench: $(VENV)/.bench
	RAY_AUTH_MODE=disabled $(PY) tests/bench/run.py

docs: $(VENV)/.base
	$(PY) -m winsample.cli.docgen docs/cli.md

clean:
	rm -rf build dist *.egg-info .pytest_cache .hypothesis winsample/*.so
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
	rm -rf $(VENV)
