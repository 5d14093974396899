# doraforge: `make test` and `make demo` are the two commands; both build .venv themselves.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
CREATED := $(VENV)/.created
RUNTIME := $(VENV)/.runtime
STAMP := $(VENV)/.installed
# pip -q still passes on the build backend's warnings: setuptools' ten-line "Editable
# installation ... folders with the same name as your package" (doraforge/ is that folder
# on purpose). pip's own messages are not Python warnings and still show.
PIP := PYTHONWARNINGS=ignore::UserWarning $(PY) -m pip

# Python >= 3.12: 3.12 first (what doraforge is tested on), from PATH or straight from
# pyenv's versions folder (python3 here is 3.11 and pyenv's shims may not expose 3.12).
PYTHON ?= $(shell for c in python3.12 $$(ls -d $$HOME/.pyenv/versions/3.12*/bin/python3.12 2>/dev/null | sort -V -r) python3.13 python3; do \
    if command -v $$c >/dev/null 2>&1 && $$c -c 'import sys; assert sys.version_info >= (3, 12)' 2>/dev/null; then echo $$c; exit; fi; \
    done)

.PHONY: test test-fast check demo bench lint format clean browser eval node sandbox peers bytecode

# Two install stamps: `make demo` needs only doraforge itself ($(RUNTIME)); `make test` adds
# the test extras ($(STAMP)). Each step prints one progress line and pip stays quiet.
$(CREATED):
	@if [ -z "$(PYTHON)" ]; then echo "doraforge needs Python >= 3.12 (none found on PATH or in ~/.pyenv)"; exit 1; fi
	@echo "==> creating $(VENV) with $$($(PYTHON) --version)"
	@$(PYTHON) -m venv $(VENV)
	@$(PY) -m pip install -q --upgrade pip
	@touch $(CREATED)

$(RUNTIME): pyproject.toml $(CREATED)
	@echo "==> installing doraforge into $(VENV) (the first time takes a minute or two)"
	@$(PIP) install -q -e .
	@touch $(RUNTIME)

$(STAMP): pyproject.toml $(RUNTIME)
	@echo "==> installing the test extras into $(VENV)"
	@$(PIP) install -q -e '.[test]'
	@touch $(STAMP)

# The checkout's own modules as bytecode. An editable install is never byte-compiled, and
# where PYTHONDONTWRITEBYTECODE is set (it is on this project's machines) every Dora node,
# Gateway and CLI process would compile doraforge's sources again at each start (~0.1 s
# of CPU per `doraforge` command). A source edited since is compiled afresh in memory
# (Python compares its time stamp and size); -q prints only errors.
bytecode: $(RUNTIME)
	@$(PY) -m compileall -q -j 0 -x '/skills/' $$(find doraforge -maxdepth 1 -type l) doraforge

# Style, the import contracts of ARCHITECTURE.md ([tool.importlinter]) and the type
# checker ([tool.mypy]); all configured in pyproject.toml.
lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports
	$(VENV)/bin/mypy

# The agent-context contract eval (its shipped fixture suite) runs at threshold 0: one
# failing or erroring case fails the run, and its report is printed.
# Two pytest-xdist workers, each test module on one worker (its cells and servers are
# module fixtures): ~17 min here instead of ~26 serially. TEST_ARGS= runs serially.
TEST_ARGS ?= -n 2 --dist loadscope

test: $(STAMP) lint browser node sandbox eval peers bytecode
	PATH=$(CURDIR)/$(VENV)/bin:$$PATH $(VENV)/bin/pytest $(TEST_ARGS)

eval: $(STAMP)
	@$(VENV)/bin/doraforge eval agent-context --failure-threshold 0 > $(VENV)/eval-agent-context.json \
	    || { cat $(VENV)/eval-agent-context.json; exit 1; }
	@$(PY) -c "import json; r = json.load(open('$(VENV)/eval-agent-context.json')); print('agent-context eval:', r['summary'])"

# The peers nobody here wrote (PhyAgentOS, OpenArm's MuJoCo node, mcp-server-time, the MCP
# TypeScript SDK client and the MCP Inspector CLI), each in its own environment under
# .peers/, built before pytest starts so no test's time limit covers a download; reused
# while current.
peers: $(STAMP) node
	@$(PY) -m tests.peers.install

# Tier 2 of the tool executors runs untrusted MCP servers under Debian's bubblewrap.
sandbox:
	@command -v bwrap >/dev/null 2>&1 || { \
	    if [ "$$(id -u)" = 0 ]; then export DEBIAN_FRONTEND=noninteractive; \
	        apt-get install -y -q bubblewrap || { apt-get update -q && apt-get install -y -q bubblewrap; }; \
	    else echo "tier-2 tool sandboxes need bubblewrap: sudo apt-get install bubblewrap"; exit 1; fi; }

# The second MCP client of the tests is the official TypeScript SDK (installed by the tests
# with `npm ci` from tests/peers/mcp_typescript/): it needs node >= 20 and npm, installed
# here from the machine's apt sources when root and missing.
node:
	@command -v node >/dev/null 2>&1 && command -v npm >/dev/null 2>&1 || { \
	    if [ "$$(id -u)" = 0 ]; then export DEBIAN_FRONTEND=noninteractive; \
	        apt-get install -y -q nodejs npm || { apt-get update -q && apt-get install -y -q nodejs npm; }; \
	    else echo "the MCP TypeScript client tests need node >= 20 and npm: sudo apt-get install nodejs npm"; exit 1; fi; }
	@node -e 'process.exit(+process.versions.node.split(".")[0] >= 20 ? 0 : 1)' || { \
	    echo "the MCP TypeScript client tests need node >= 20 (found $$(node --version)): install a newer nodejs"; exit 1; }

# The console's browser tests drive Debian's chromium through Playwright's executable_path
# (Playwright's own browser download is never used): installed here when root, else named.
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	    if [ "$$(id -u)" = 0 ]; then export DEBIAN_FRONTEND=noninteractive; \
	        apt-get install -y -q chromium || { apt-get update -q && apt-get install -y -q chromium; }; \
	    else echo "the console's browser tests need Debian's chromium: sudo apt-get install chromium"; exit 1; fi; }

# The inner loop: `make check` runs the static checks only, `make test-fast` the unit
# tiers only (no real dataflows, no long physics runs).
check: lint

test-fast: $(STAMP) bytecode
	PATH=$(CURDIR)/$(VENV)/bin:$$PATH $(VENV)/bin/pytest -m "not e2e and not slow"

demo: bytecode
	PATH=$(CURDIR)/$(VENV)/bin:$$PATH $(VENV)/bin/doraforge demo

bench: $(STAMP) bytecode
	PATH=$(CURDIR)/$(VENV)/bin:$$PATH $(PY) bench/gateway_query.py
	PATH=$(CURDIR)/$(VENV)/bin:$$PATH $(PY) bench/sim.py
	PATH=$(CURDIR)/$(VENV)/bin:$$PATH $(PY) bench/paos_store.py
	PATH=$(CURDIR)/$(VENV)/bin:$$PATH $(PY) bench/install.py
	PATH=$(CURDIR)/$(VENV)/bin:$$PATH $(PY) bench/registry.py
	PATH=$(CURDIR)/$(VENV)/bin:$$PATH $(PY) bench/context.py

format: $(STAMP)
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .import_linter_cache .grimp_cache build *.egg-info
