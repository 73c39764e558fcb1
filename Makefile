# envtool — the two set-up commands are `make verify` (the main job) and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.envtool-installed
TEST_STAMP := $(VENV)/.envtool-test-installed
TORCH_VERSION ?= 2.13.0

.PHONY: verify test lint bench lock clean demo doctor sshd

# envtool alone (what `make verify` and `make doctor` need): its own dependencies, no torch —
# the probes run under each node's own environment, never envtool's.
$(STAMP): pyproject.toml
	@test -x $(BIN)/python || { echo "make: creating $(VENV) (python -m venv)"; $(PYTHON) -m venv $(VENV); }
	@echo "make: installing envtool and its dependencies into $(VENV) (pip)"
	$(BIN)/python -m pip install --progress-bar on --disable-pip-version-check -e .
	@touch $@

# The tests add pytest, conda-lock, the linters, matplotlib and torch (CPU) for the all-reduce
# and probe tests; on this project's machines the 2.13.0 wheel lies on disk (about 40 s),
# elsewhere pip downloads it (about 200 MB).
$(TEST_STAMP): $(STAMP)
	@echo "make: installing the test extras and torch $(TORCH_VERSION) (CPU) into $(VENV) (pip)"
	$(BIN)/python -m pip install --progress-bar on --disable-pip-version-check -e '.[test,lint,plot]'
	$(BIN)/python -c 'import torch' 2>/dev/null || \
	  $(BIN)/python -m pip install --progress-bar on --disable-pip-version-check torch==$(TORCH_VERSION)
	@touch $@

# The main job: the lock is fresh, then every host in hosts.txt (here: this machine,
# local transport) is probed and compared with the lock.
HOSTS     ?= hosts.txt
TRANSPORT ?= local
verify: $(STAMP)
	$(BIN)/envtool lock --check
	$(BIN)/envtool verify --hosts $(HOSTS) --transport $(TRANSPORT)

# A new lab member's check of this machine, step by step, each failure with its fix:
# lock fresh, environment installed, packages as locked, torch, CUDA, DDP smoke test, ports.
doctor: $(STAMP)
	$(BIN)/envtool doctor $(DOCTOR_ARGS)

# Two workers, each test file whole on one (its sshd, Slurm or dockerd fixtures started once):
# the suite waits on daemons and networks more than on the CPU. TEST_WORKERS=0: one process.
TEST_WORKERS ?= 2
test: $(TEST_STAMP)
	$(BIN)/python -m pytest --durations=12 $(if $(filter 0,$(TEST_WORKERS)),,-n $(TEST_WORKERS) --dist loadfile)

lint: $(TEST_STAMP)
	$(BIN)/ruff check envtool probes tests bench examples
	$(BIN)/ruff format --check envtool probes tests bench examples
	$(BIN)/mypy

bench: $(TEST_STAMP)
	$(BIN)/python bench/bench_lock.py

# Re-make the shipped lock against the conda-forge snapshot in ../shared (see README).
lock: $(STAMP)
	$(BIN)/envtool lock --channel-mirror conda-forge=file://$(abspath ../shared/data/conda-forge-snapshot)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache

# A one-minute demonstration: three sshd nodes on loopback, one drifted, envtool verify.
demo: $(TEST_STAMP)
	@test -x /usr/sbin/sshd || $(MAKE) -s sshd
	$(BIN)/python examples/demo.py

# The demo's "nodes" are OpenSSH sshd processes on loopback: installed here when missing (root
# with apt), else the command to run is printed.
sshd:
	@if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "installing openssh-server for the demo's sshd nodes"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
	    apt-get install -y -qq --no-install-recommends openssh-server openssh-client >/dev/null; \
	else \
	  echo "make demo needs OpenSSH's sshd: sudo apt-get install openssh-server" >&2; exit 2; \
	fi
