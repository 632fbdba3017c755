# congestlab: `make demo` installs what is missing and runs the main study;
# `make test` installs the same and runs every test suite.
# Components add their own steps in mk/*.mk by appending to APT_PACKAGES,
# BUILD_TARGETS and TEST_TARGETS.
SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
VENV := .venv
# the venv's interpreter: one every user can run, so that `report`, `analyze` and the other
# readers of a run directory work without root (README, "Without root"); `make venv
# PYTHON=...` chooses another
PYTHON ?= $(shell mk/readable-python.sh)
PY := $(VENV)/bin/python
CONGESTLAB := $(VENV)/bin/congestlab
STAMPS := .stamps
# each suite's time against the budget (docs/testing.md): `@$(TIMER) start|end SUITE`
# around a suite's steps, each step a recipe line of its own
TIMER := mk/suite-time
export CARGO_TERM_COLOR := never

APT_PACKAGES := apache2 nginx caddy lighttpd lighttpd-mod-openssl h2o ngtcp2-server ngtcp2-client mgen iperf iperf3 tcpdump tshark curl iproute2 iptables ethtool procps iputils-ping \
  python3-venv
BUILD_TARGETS :=
TEST_TARGETS :=

include $(wildcard mk/*.mk)

.PHONY: demo test test-clock install apt venv build test-python test-lint test-unit test-netns clean-runs
.DEFAULT_GOAL := demo

install: apt venv build

# Debian packages: only the missing ones are installed; nothing is started.
apt:
	@$(TIMER) start setup
	@missing=""; for p in $(APT_PACKAGES); do \
	  dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed' || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "apt-get install:$$missing"; \
	  apt-get update -qq; \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	fi
	@$(TIMER) end setup

venv: $(STAMPS)/venv
$(STAMPS)/venv: pyproject.toml
	@$(TIMER) start setup
	@[ -x $(PY) ] || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test,cluster]'
	@mkdir -p $(STAMPS) && touch $@
	@$(TIMER) end setup

build: $(BUILD_TARGETS)

demo: install
	$(CONGESTLAB) reproduce ipv6 --quick

test-lint: install
	@$(TIMER) start lint
	$(VENV)/bin/lint-imports  # the package layers (pyproject.toml, docs/python-packages.md)
	$(VENV)/bin/ruff check python  # [tool.ruff] in pyproject.toml; the rules: docs/testing.md
	@$(TIMER) end lint

# pytest-xdist workers for the unit suite (0: in one process); the netns suite stays in one
# process: its tests share the machine's kernel and measure time (docs/testing.md)
UNIT_WORKERS ?= 2
test-unit: install
	@$(TIMER) start unit
	$(PY) -m pytest -q -n $(UNIT_WORKERS) python/tests/unit
	@$(TIMER) end unit

# real namespaces, as root (skipped otherwise)
test-netns: install
	@$(TIMER) start netns
	$(PY) -m pytest -q python/tests/netns
	@$(TIMER) end netns

test-python: test-lint test-unit test-netns

test-clock:
	@$(TIMER) reset

# test-clock first: the report at the end covers the whole run, builds included
test: test-clock install test-python $(TEST_TARGETS)
	@echo "make test: all suites passed"
	@$(TIMER) report
