# doraforge: `make test` and `make demo` are the two commands; both build .venv themselves.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

# Python >= 3.12: 3.12 first (what doraforge is tested on), from PATH or straight from
# pyenv's versions folder (python3 here is 3.11 and pyenv's shims may not expose 3.12).
PYTHON ?= $(shell for c in python3.12 $$(ls -d $$HOME/.pyenv/versions/3.12*/bin/python3.12 2>/dev/null | sort -V -r) python3.13 python3; do \
    if command -v $$c >/dev/null 2>&1 && $$c -c 'import sys; assert sys.version_info >= (3, 12)' 2>/dev/null; then echo $$c; exit; fi; \
    done)

.PHONY: test demo bench lint format clean

$(STAMP): pyproject.toml
	@if [ -z "$(PYTHON)" ]; then echo "doraforge needs Python >= 3.12 (none found on PATH or in ~/.pyenv)"; exit 1; fi
	@echo "==> creating $(VENV) with $$($(PYTHON) --version)"
	@$(PYTHON) -m venv $(VENV)
	@$(PY) -m pip install --progress-bar on -q --upgrade pip
	@echo "==> installing doraforge and its test extras"
	@$(PY) -m pip install --progress-bar on -e '.[test]'
	@touch $(STAMP)

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

test: lint
	PATH=$(CURDIR)/$(VENV)/bin:$$PATH $(VENV)/bin/pytest

demo: $(STAMP)
	PATH=$(CURDIR)/$(VENV)/bin:$$PATH $(VENV)/bin/doraforge demo

bench: $(STAMP)
	PATH=$(CURDIR)/$(VENV)/bin:$$PATH $(PY) bench/gateway_query.py
	PATH=$(CURDIR)/$(VENV)/bin:$$PATH $(PY) bench/sim.py
	PATH=$(CURDIR)/$(VENV)/bin:$$PATH $(PY) bench/paos_store.py
	PATH=$(CURDIR)/$(VENV)/bin:$$PATH $(PY) bench/install.py
	PATH=$(CURDIR)/$(VENV)/bin:$$PATH $(PY) bench/registry.py

format: $(STAMP)
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info
