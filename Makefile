# `make run` starts a local cluster; `make test` runs every test. Both install what they need.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell sha1sum pyproject.toml | cut -c1-12)
# Spark's Kafka connector and its dependencies, as tests/peers/setup.sh leaves them.
SPARK_CONNECTOR := $(or $(RAFKA_PEERS_CACHE),.cache/peers)/spark

.PHONY: run test unit lint bench proto clean compat chaos

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	rm -f $(VENV)/.installed-*; touch $(STAMP)

run: $(STAMP)
	$(VENV)/bin/rafka up $(ARGS)

test: lint
	bash tests/integration/clients/setup.sh
	$(PY) -m pytest -q -ra --durations=20 $(ARGS)

# Apache Kafka 4.4 and Rafka side by side: every differential case, then the table of answers
# (case, Kafka's, Rafka's, same or allowlisted), also in .cache/compat/report.md.
compat: $(STAMP)
	bash tests/peers/setup.sh
	$(PY) -m pytest -q -ra tests/compat $(ARGS)

# The long verify schedule: for each workload, one `rafka verify` run per nemesis (CHAOS_TIME
# seconds of faults each, a fresh cluster each; network faults need root), then one table row
# per nemesis. Fails when any run found an anomaly.
CHAOS_NEMESES ?= kill-leader,kill-broker,pause-follower,kill-meta-leader,isolate-node,split-majority,isolate-meta-leader,zombie-leader,one-way,packet-loss,disk-full,disk-error,clock-skew
CHAOS_TIME ?= 180
# A workload may name its group protocol: group:consumer is the group workload with KIP-848.
CHAOS_WORKLOADS ?= produce txn ctp group group:consumer
chaos: $(STAMP)
	status=0; for spec in $(CHAOS_WORKLOADS); do \
	  w=$${spec%%:*}; p=classic; case $$spec in *:*) p=$${spec#*:};; esac; \
	  $(PY) -m cluster.cli verify --workload $$w --group-protocol $$p --each --nemesis $(CHAOS_NEMESES) --time $(CHAOS_TIME) --seed 1 $(ARGS) || status=1; \
	done; exit $$status

unit: $(STAMP)
	$(PY) -m pytest -q tests/unit

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

bench: $(STAMP)
	$(PY) -m pip install -q -e '.[bench]'
	bash tests/peers/setup.sh
	$(PY) bench/produce_consume.py $(ARGS)
	$(PY) bench/replication.py
	$(PY) bench/groups.py
	$(PY) bench/spark.py --jars $(SPARK_CONNECTOR)
	$(PY) bench/meta.py
	$(PY) bench/security.py
	$(PY) bench/transactions.py
	$(PY) bench/share_groups.py
	$(PY) bench/vs_kafka.py

proto: $(STAMP)
	$(PY) -m proto.generate

clean:
	rm -rf data .pytest_cache

# `make image` builds the container image rafka:dev = rafka:<version> with no registry
# (deploy/image/build.sh: debootstrap base, PyPI wheels, this checkout; cached).
# `make k8s-check` lints, renders and strictly validates the Helm chart and the plain
# manifests (tests/unit/deploy; helm and kubernetes-validate are fetched into .cache/deploy).
.PHONY: image k8s-check
image: $(STAMP)
	bash deploy/image/build.sh

k8s-check: $(STAMP)
	$(PY) -m pytest -q -ra tests/unit/deploy

# The Spark pipeline (spark/, README "Spark pipeline"): Maven resolves Spark's official Kafka
# connector into .cache/peers/spark (tests/peers/setup.sh), then the Spark tests run (they are
# also part of `make test`).
.PHONY: spark
spark: $(STAMP)
	bash tests/peers/setup.sh
	$(PY) -m pytest -q -ra tests/integration/test_spark_*.py $(ARGS)
