# `make run` starts a local cluster; `make test` runs every test. Both install what they need.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell sha1sum pyproject.toml | cut -c1-12)

.PHONY: run test unit lint bench proto clean compat

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	$(PY) -m spark.connector.shim  # the kafka.DefaultSource jar, against the pyspark just installed
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

unit: $(STAMP)
	$(PY) -m pytest -q tests/unit

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

bench: $(STAMP)
	$(PY) -m pip install -q -e '.[bench]'
	$(PY) bench/produce_consume.py $(ARGS)
	$(PY) bench/replication.py
	$(PY) bench/groups.py
	$(PY) bench/spark.py
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

# The Spark pipeline (spark/, README "Spark pipeline"): builds the kafka.DefaultSource shim jar
# against the installed pyspark, then runs the Spark tests (they are also part of `make test`).
.PHONY: spark
spark: $(STAMP)
	$(PY) -m spark.connector.shim
	$(PY) -m pytest -q -ra tests/integration/test_spark_source.py \
		tests/integration/test_spark_pipeline.py tests/integration/test_spark_failover.py $(ARGS)
