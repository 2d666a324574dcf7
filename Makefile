# rbench — the README's two commands are `make run` and `make test`.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
export SPARK_LOCAL_IP ?= 127.0.0.1
export PYSPARK_PYTHON := $(abspath $(PY))
export PYSPARK_DRIVER_PYTHON := $(abspath $(PY))
WORKLOAD ?= conf/workloads/quickstart.yaml

.PHONY: study-004 study-000 run test lint unit dist chart-test prometheus dashboards bench bench-runtime bench-codec bench-amqp091 bench-amqp10 bench-streams bench-reduce bench-regress bench-startup bench-soak bench-scale broker broker-4 broker-4-stop cluster cluster-4 cluster-stop build venv clean

# Virtualenv with rbench installed editable: its runtime dependencies only, all `make run` needs.
$(VENV)/.installed: pyproject.toml setup.py
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip 'setuptools>=77' wheel 'cython>=3.0'
	@# the Cython extensions compile in place (two jobs) while pip fetches the runtime dependencies; pip's own
	@# build (no isolation: the tools above) then skips them, so nothing compiles twice (setup.py)
	$(PY) setup.py -q build_ext --inplace -j 2 > $(VENV)/build_ext.log 2>&1 & ext=$$!; \
	RBENCH_EXTENSIONS=inplace $(PY) -m pip install -q --no-build-isolation -e . || { kill $$ext; exit 1; }; \
	wait $$ext || { cat $(VENV)/build_ext.log; exit 1; }
	touch $@

venv: $(VENV)/.installed

# One group of pyproject.toml's optional-dependencies (test, bench, dashboards) on top, once per venv: its
# requirement lines are installed as they are, so rbench itself is not rebuilt; redone after the venv is
# (pyproject.toml changed). Stamps: .venv/.extra-test, .venv/.extra-bench, .venv/.extra-dashboards.
define EXTRA_REQUIREMENTS
import sys
try:
    import tomllib
except ImportError:                     # Python 3.10: the TOML reader pip carries
    from pip._vendor import tomli as tomllib
with open("pyproject.toml", "rb") as f:
    print("\n".join(tomllib.load(f)["project"]["optional-dependencies"][sys.argv[1]]))
endef
export EXTRA_REQUIREMENTS

$(VENV)/.extra-%: $(VENV)/.installed
	$(PY) -c "$$EXTRA_REQUIREMENTS" $* > $@.txt
	$(PY) -m pip install -q -r $@.txt
	touch $@

TEST_EXTRA := $(VENV)/.extra-test
BENCH_EXTRA := $(VENV)/.extra-bench

# Recompile ext/OWNER/NAME.pyx into rbench/OWNER/_NAME whenever a source changes (setup.py).
build: venv
	$(PY) setup.py -q build_ext --inplace -j 2

broker:
	@bash scripts/ensure-broker.sh

# RabbitMQ 4.0.5 beside the system broker: Debian trixie's package in a debootstrap root built once outside the
# repo (RBENCH_BROKER4_ROOT, default /var/lib/rbench/rabbitmq-4); AMQP 5680, streams 5580, management 15680,
# Prometheus 15780 (docs/brokers.md). The tests run the driver contract suite on it beside 3.10.
broker-4:
	@bash scripts/broker4.sh start

broker-4-stop:
	@bash scripts/broker4.sh stop

# A local 3-node RabbitMQ cluster beside the system broker: rabbit-1..3@localhost, AMQP 5701-5703 (docs/faults.md).
cluster:
	@bash scripts/cluster.sh start 3

cluster-stop:
	@bash scripts/cluster.sh stop --clean

# The same 3-node cluster on RabbitMQ 4.0 (rabbit4-1..3@localhost, AMQP 5721-5723), from broker-4's root.
cluster-4: broker-4
	@RBENCH_CLUSTER_VERSION=4 bash scripts/cluster.sh start 3

# The seeds' studies (docs/studies/README.md): start the brokers and variants they need, run them at the reduced
# sizes of conf/studies/, write docs/studies/seed-NNN-results.md and seed-NNN.png. About 5-8 minutes each here.
study-004: build broker-4
	@PYTHON=$(abspath $(PY)) RBENCH="$(abspath $(VENV)/bin/rbench)" bash scripts/study.sh 004

study-000: build broker-4
	@PYTHON=$(abspath $(PY)) RBENCH="$(abspath $(VENV)/bin/rbench)" bash scripts/study.sh 000

run: build broker
	$(VENV)/bin/rbench run $(WORKLOAD) --master "local[2]"

test: build $(TEST_EXTRA) broker broker-4 prometheus lint
	$(PY) -m pytest -q tests

# ruff over the whole tree, mypy --strict over rbench/ (configured in pyproject.toml)
lint: build $(TEST_EXTRA)
	$(VENV)/bin/ruff check rbench tests bench jobs
	$(VENV)/bin/mypy

# Relocatable environment for spark-submit --archives dist/rbench-env.tar.gz#env (docs/cluster.md);
# rebuilt only when rbench's sources change. venv-pack comes with the test extra.
dist: build $(TEST_EXTRA)
	$(PY) scripts/pack_env.py

# helm/rbench rendered and validated offline (also part of `make test`).
chart-test: venv $(TEST_EXTRA)
	$(PY) -m pytest -q tests/chart

# Prometheus server, promtool and Pushgateway (Debian packages) for tests/spark/test_prometheus_run.py.
prometheus:
	@bash scripts/ensure-prometheus.sh

# Regenerate the Grafana dashboard JSON from rbench/live/dashboard.py (and the Helm chart's copy).
dashboards: venv $(VENV)/.extra-dashboards
	$(PY) -m rbench.live.dashboard dashboards/rbench-run.json
	cp dashboards/rbench-run.json helm/rbench/dashboards/rbench-run.json

unit: build $(TEST_EXTRA)
	$(PY) -m pytest -q tests/unit

bench: bench-runtime bench-codec bench-amqp091 bench-amqp10 bench-streams bench-reduce bench-startup

# BENCH_ROOT=DIR: another checkout (built in place) as the lateness table's peer, e.g. the commit before a change
bench-runtime: build $(BENCH_EXTRA) broker
	$(PY) bench/bench_runtime.py
	$(PY) bench/bench_runtime.py --lateness --rounds 3 $(if $(BENCH_ROOT),--root $(BENCH_ROOT))

bench-codec: build $(BENCH_EXTRA)
	$(PY) bench/bench_codec.py

bench-amqp091: build $(BENCH_EXTRA) broker
	$(PY) bench/bench_amqp091.py

# AMQP 1.0: the amqp10 driver vs Qpid Proton peers in Python and C, quiver's sender/receiver shape (docs/amqp10.md).
bench-amqp10: build $(BENCH_EXTRA) broker broker-4
	@bash scripts/build-proton-c-peer.sh
	$(PY) bench/bench_amqp10.py

bench-streams: build $(BENCH_EXTRA) broker
	$(PY) bench/bench_streams.py

bench-reduce: build $(BENCH_EXTRA)
	$(PY) bench/bench_reduce.py

# 30 minutes at 1,000 msg/s: client, coordinator and JVM RSS, fds, loop lag and Parquet parts over time (docs/soak.md).
# SOAK_MINUTES=N for a shorter try.
bench-soak: build $(BENCH_EXTRA) broker prometheus
	$(PY) bench/bench_soak.py --minutes $(or $(SOAK_MINUTES),30) --out bench/out/soak

# Scale by simulation: 8, 16, 32 and 64 tasks on local[N], one rbench process each, a few msg/s per task; the
# coordinator's cost per task → bench/out/scale.md and docs/scale.png (docs/scale.md). About 10 minutes here;
# SCALE_TASKS=8,16 for a shorter one. 64 Python workers on 2 cores are heavy: run it once, on a quiet machine.
SCALE_TASKS ?= 8,16,32,64
bench-scale: build $(BENCH_EXTRA) broker
	$(PY) bench/bench_scale.py --tasks $(SCALE_TASKS)

# Command → first message of `rbench perftest -x 1 -y 1 -a -s 12 -z 30`, stage by stage (--timings), 3 fresh
# processes on local[*], medians → bench/out/startup.md (docs/timing.md). BENCH_ROOT=DIR: another checkout, built in
# place, run alternately as the "before" column.
bench-startup: build broker
	$(PY) bench/bench_startup.py --rounds 3 --seconds 30 $(if $(BENCH_ROOT),--root $(BENCH_ROOT))

# False-alarm and detection rates of `rbench regress` on seeded synthetic histories (docs/history.md).
bench-regress: venv $(BENCH_EXTRA)
	$(PY) bench/regress_rates.py

clean:
	rm -rf build rbench/*/_*.so ext/*/*.c
