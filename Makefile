# envtool — the two set-up commands are `make verify` (the main job) and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.envtool-installed

.PHONY: verify test lint bench lock clean

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[test,lint]'
	@touch $@

# The main job: the lock is fresh, then every host in hosts.txt (here: this machine,
# local transport) is probed and compared with the lock.
HOSTS     ?= hosts.txt
TRANSPORT ?= local
verify: $(STAMP)
	$(BIN)/envtool lock --check
	$(BIN)/envtool verify --hosts $(HOSTS) --transport $(TRANSPORT)

test: $(STAMP)
	$(BIN)/python -m pytest

lint: $(STAMP)
	$(BIN)/ruff check envtool tests bench
	$(BIN)/mypy

bench: $(STAMP)
	$(BIN)/python bench/bench_lock.py

# Re-make the shipped lock against the conda-forge snapshot in ../shared (see README).
lock: $(STAMP)
	$(BIN)/envtool lock --channel-mirror conda-forge=file://$(abspath ../shared/data/conda-forge-snapshot)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
