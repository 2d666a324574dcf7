# syntax=docker/dockerfile:1
# rbench image: Python 3.11, Java 17, pyspark and rbench. The Spark driver and executor image of
# helm/rbench on Kubernetes (docs/cluster.md). This project's machines have no container engine:
# the file is linted by tests/chart/test_image_files.py (hadolint), never built by its tests.
#   docker build -t REGISTRY/rbench:0.1.0 .

# ---- build: the rbench wheel, compiled extensions included ---------------------------------------
FROM python:3.11-slim-bookworm AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends gcc=4:12.2.* libc6-dev=2.36-* \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY pyproject.toml setup.py README.md ./
COPY ext ext
COPY rbench rbench
COPY conf conf
RUN pip install --no-cache-dir "cython>=3.0,<4" "setuptools>=77" "wheel>=0.43" \
 && pip wheel --no-cache-dir --no-build-isolation --no-deps -w /wheels .

# ---- runtime ---------------------------------------------------------------------------------------
FROM python:3.11-slim-bookworm
# Spark 4 runs on Java 17 or 21; procps for Spark's scripts, tini to reap the JVM's children
RUN apt-get update \
 && apt-get install -y --no-install-recommends openjdk-17-jre-headless=17.* procps=2:4.* tini=0.19.* \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /wheels /tmp/wheels
# one venv holds rbench, its dependencies and pyspark (whose jars and bin/ are the Spark runtime)
RUN python -m venv /opt/rbench/venv \
 && /opt/rbench/venv/bin/pip install --no-cache-dir /tmp/wheels/rbench-*.whl \
 && rm -rf /tmp/wheels
ENV PATH=/opt/rbench/venv/bin:$PATH \
    SPARK_HOME=/opt/rbench/venv/lib/python3.11/site-packages/pyspark \
    PYSPARK_PYTHON=/opt/rbench/venv/bin/python \
    PYSPARK_DRIVER_PYTHON=/opt/rbench/venv/bin/python \
    PYTHONUNBUFFERED=1
COPY jobs /opt/rbench/jobs
COPY conf /opt/rbench/conf
COPY scripts/docker-entrypoint.sh /opt/rbench/entrypoint.sh
# Spark on Kubernetes starts executors (and operator-made drivers) as `IMAGE executor|driver ...`
# uid and gid 185 in every pod: the chart's fsGroup 185 makes the results claim writable to all
RUN groupadd --gid 185 spark \
 && useradd --uid 185 --gid 185 --home-dir /opt/rbench --no-create-home spark \
 && mkdir -p /results && chown spark /results
USER 185:185
WORKDIR /opt/rbench
ENTRYPOINT ["/usr/bin/tini", "--", "/opt/rbench/entrypoint.sh"]
CMD ["rbench", "--help"]
