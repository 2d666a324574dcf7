"""helm/rbench rendered offline by Helm itself (helm-python-sdk bundles Helm's Go library), no cluster.

Each value set is rendered, then: built-in kinds are validated with kubernetes-validate (strict:
unknown fields fail) for the oldest and newest Kubernetes the chart claims; the
ScheduledSparkApplication against the spark-operator's CRD schema from ../shared/crds (a clone
without it skips that check and says so); the workload ConfigMap is loaded by rbench's own
workload loader, and the job's arguments are parsed by rbench's own command line, so the chart
and the program cannot drift apart. Bad values must fail with a message naming the value.
"""
from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

helm = pytest.importorskip("helm_python", reason="helm-python-sdk (the pinned Helm renderer) is in the test extra")
kubernetes_validate = pytest.importorskip("kubernetes_validate")
jsonschema = pytest.importorskip("jsonschema")

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "helm" / "rbench"
CRDS = ROOT.parent / "shared" / "crds"
SSA_CRD = CRDS / "sparkoperator.k8s.io_scheduledsparkapplications.yaml"
K8S_VERSIONS = ["1.27.0", "1.37.0"]      # Chart.yaml kubeVersion >=1.27 (CronJob timeZone GA); the newest known
NAMESPACE = "bench"
Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

PRICES = {"currency": "EUR", "hours_per_month": 730, "source": "test prices",
          "instances": {"m5.large": {"hourly": 0.1}, "bench.xl": {"hourly": 0.5}},
          "volumes": {"gp3": {"gb_month": 0.08, "iops_month": 0.005, "baseline_iops": 3000, "included_iops": 3000}}}

# name → (values, release name); each exercises a different branch of every template
VALUE_SETS: dict[str, dict[str, Any]] = {
    "defaults": {},
    "operator-podmonitor": {"scheduler": "operator", "metrics": {"mode": "podMonitor", "podMonitor": {"labels": {"release": "prom"}}}},
    "existing-configmap-claim-sa": {"workload": {"existingConfigMap": "my-workload", "key": "sizing.yaml", "spec": {}},
                                    "clusters": [], "results": {"pvc": {"existingClaim": "nfs-results"}},
                                    "serviceAccount": {"create": False, "name": "spark"}, "rbac": {"create": False}},
    "object-store-prices": {"results": {"objectStore": {"enabled": True, "uri": "s3://capacity/rbench", "existingSecret": "s3-creds"}},
                            "prices": PRICES, "history": {"commit": "abc1234", "regress": False}},
    "tuned-cronjob": {"schedule": "30 1 * * 1-5", "timeZone": "Europe/Paris", "suspend": True, "concurrencyPolicy": "Replace",
                      "successfulRunsHistoryLimit": 7, "failedRunsHistoryLimit": 1, "metrics": {"enabled": False},
                      "image": {"repository": "registry.example/rbench", "tag": "1.2.3", "pullPolicy": "Always",
                                "pullSecrets": [{"name": "regcred"}]},
                      "spark": {"executor": {"instances": 5, "cores": 4, "memory": "6g"}, "driver": {"cores": 2, "memory": "3g"},
                                "conf": {"spark.network.timeout": "300s", "spark.task.maxFailures": 1}},
                      "nodeSelector": {"pool": "bench"}, "tolerations": [{"key": "bench", "operator": "Exists", "effect": "NoSchedule"}],
                      "resources": {"requests": {"cpu": "1", "memory": "3Gi"}}},
    "operator-object-store-clusters": {"scheduler": "operator", "prices": PRICES, "timeZone": "UTC",
                                       "results": {"objectStore": {"enabled": True, "uri": "gs://capacity/nightly", "existingSecret": "gcs"}},
                                       "clusters": [{"name": "small", "uriSecretKey": "URI_SMALL", "nodes": 3, "instanceType": "m5.large",
                                                     "volumeType": "gp3", "volumeGb": 50},
                                                    {"name": "large", "uriSecretKey": "URI_LARGE", "nodes": 5, "instanceType": "bench.xl",
                                                     "volumeType": "gp3", "volumeGb": 200}]},
    "release-named-rbench": {"metrics": {"mode": "podMonitor"}},
}
RELEASE = {"release-named-rbench": "rbench"}


def merged(overrides: dict[str, Any]) -> dict[str, Any]:
    """Overrides as `helm -f` would merge them (maps merge, lists replace)."""
    with helm.Chart.load(CHART) as chart:
        return chart.merge_values(overrides)


def render(values: dict[str, Any], release: str = "nightly") -> list[dict[str, Any]]:
    with helm.Chart.load(CHART) as chart:
        manifests = chart.render(values, name=release, namespace=NAMESPACE, is_install=True)
    docs = []
    for path, text in manifests.items():
        if path.endswith("NOTES.txt"):
            continue
        docs += [d for d in yaml.load_all(text, Loader=Loader) if d]
    return docs


@pytest.fixture(scope="module", params=sorted(VALUE_SETS))
def rendered(request: pytest.FixtureRequest) -> Iterator[tuple[str, dict[str, Any], list[dict[str, Any]]]]:
    name = request.param
    values = merged(VALUE_SETS[name])
    yield name, values, render(VALUE_SETS[name], RELEASE.get(name, "nightly"))


def by_kind(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind]


def driver_pod(docs: list[dict[str, Any]]) -> dict[str, Any]:
    """The driver's pod spec (CronJob) or driver spec (ScheduledSparkApplication)."""
    (cron,) = by_kind(docs, "CronJob") or [None]
    if cron is not None:
        return cron["spec"]["jobTemplate"]["spec"]["template"]  # type: ignore[no-any-return]
    (ssa,) = by_kind(docs, "ScheduledSparkApplication")
    return ssa["spec"]["template"]["driver"]  # type: ignore[no-any-return]


def job_arguments(docs: list[dict[str, Any]]) -> tuple[list[str], list[str]]:
    """(spark-submit options before the application, the application's arguments)."""
    cron = by_kind(docs, "CronJob")
    if cron:
        args = cron[0]["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["args"]
        i = args.index("/opt/rbench/jobs/nightly.py")
        return args[:i], args[i + 1:]
    (ssa,) = by_kind(docs, "ScheduledSparkApplication")
    conf = ssa["spec"]["template"]["sparkConf"]
    return [x for k, v in conf.items() for x in ("--conf", f"{k}={v}")], ssa["spec"]["template"]["arguments"]


def spark_conf(docs: list[dict[str, Any]]) -> dict[str, str]:
    submit, _ = job_arguments(docs)
    return dict(submit[i + 1].partition("=")[::2] for i, a in enumerate(submit) if a == "--conf")


# ---- every value set -----------------------------------------------------------------------------
def test_expected_objects(rendered: tuple[str, dict[str, Any], list[dict[str, Any]]]) -> None:
    name, values, docs = rendered
    kinds = sorted(d["kind"] for d in docs)
    operator = values["scheduler"] == "operator"
    expected = ["CronJob"] if not operator else ["ScheduledSparkApplication"]
    expected += ["ServiceAccount"] if values["serviceAccount"]["create"] else []
    expected += ["Role", "RoleBinding"] if values["rbac"]["create"] else []
    expected += ["ConfigMap"] * ((not values["workload"]["existingConfigMap"]) + bool(values["prices"]))
    expected += ["PersistentVolumeClaim"] if not values["results"]["pvc"]["existingClaim"] else []
    expected += ["PodMonitor"] if values["metrics"]["enabled"] and values["metrics"]["mode"] == "podMonitor" else []
    expected += ["ConfigMap"] if values["metrics"]["grafanaDashboard"]["enabled"] else []
    assert kinds == sorted(expected), name
    names = [(d["kind"], d["metadata"]["name"]) for d in docs]
    assert len(set(names)) == len(names)
    for d in docs:
        assert len(d["metadata"]["name"]) <= 63
        assert d["metadata"]["labels"]["app.kubernetes.io/instance"] == RELEASE.get(name, "nightly")


def test_builtin_kinds_validate(rendered: tuple[str, dict[str, Any], list[dict[str, Any]]]) -> None:
    _, _, docs = rendered
    builtin = [d for d in docs if "." not in d["apiVersion"].split("/")[0] or d["apiVersion"].startswith(("batch/", "rbac.authorization.k8s.io/"))]
    assert builtin
    for version in K8S_VERSIONS:
        for d in builtin:
            try:
                kubernetes_validate.validate(d, version, strict=True)
            except kubernetes_validate.ValidationError as exc:
                pytest.fail(f"{d['kind']} {d['metadata']['name']} (Kubernetes {version}): {exc.message} at {list(exc.path)}")


def test_schedule_and_concurrency(rendered: tuple[str, dict[str, Any], list[dict[str, Any]]]) -> None:
    _, values, docs = rendered
    (scheduled,) = by_kind(docs, "CronJob") or by_kind(docs, "ScheduledSparkApplication")
    spec = scheduled["spec"]
    assert spec["schedule"] == values["schedule"] and spec["concurrencyPolicy"] == values["concurrencyPolicy"]
    assert spec["suspend"] is values["suspend"]
    assert spec.get("timeZone") == (values["timeZone"] or None)
    ok, failed = ("successfulJobsHistoryLimit", "failedJobsHistoryLimit") if scheduled["kind"] == "CronJob" else \
        ("successfulRunHistoryLimit", "failedRunHistoryLimit")
    assert (spec[ok], spec[failed]) == (values["successfulRunsHistoryLimit"], values["failedRunsHistoryLimit"])


def test_spark_sizing_from_values(rendered: tuple[str, dict[str, Any], list[dict[str, Any]]]) -> None:
    _, values, docs = rendered
    ex, drv = values["spark"]["executor"], values["spark"]["driver"]
    conf = spark_conf(docs)
    assert conf["spark.pyspark.python"] == "/opt/rbench/venv/bin/python"
    for k, v in values["spark"]["conf"].items():
        assert conf[k] == str(v)
    for k, v in values["nodeSelector"].items():
        assert conf[f"spark.kubernetes.node.selector.{k}"] == v
    if values["scheduler"] == "cronjob":
        assert (conf["spark.executor.instances"], conf["spark.executor.cores"], conf["spark.executor.memory"]) == \
            (str(ex["instances"]), str(ex["cores"]), ex["memory"])
        assert (conf["spark.driver.cores"], conf["spark.driver.memory"]) == (str(drv["cores"]), drv["memory"])
        assert conf["spark.kubernetes.container.image"] == f"{values['image']['repository']}:{values['image']['tag']}"
        assert conf["spark.kubernetes.executor.volumes.persistentVolumeClaim.results.mount.path"] == "/results"
        assert conf["spark.driver.host"] == "$(POD_IP)"
    else:
        (ssa,) = by_kind(docs, "ScheduledSparkApplication")
        t = ssa["spec"]["template"]
        assert (t["executor"]["instances"], t["executor"]["cores"], t["executor"]["memory"]) == (ex["instances"], ex["cores"], ex["memory"])
        assert (t["driver"]["cores"], t["driver"]["memory"]) == (drv["cores"], drv["memory"])
        assert t["mainApplicationFile"] == "local:///opt/rbench/jobs/nightly.py"


def test_rbac_lets_the_driver_create_executor_pods(rendered: tuple[str, dict[str, Any], list[dict[str, Any]]]) -> None:
    _, values, docs = rendered
    pod = driver_pod(docs)
    sa = pod["spec"]["serviceAccountName"] if "spec" in pod else pod["serviceAccount"]
    if values["serviceAccount"]["create"]:
        assert [d["metadata"]["name"] for d in by_kind(docs, "ServiceAccount")] == [sa]
    else:
        assert sa == values["serviceAccount"]["name"]
    if values["rbac"]["create"]:
        (role,), (binding,) = by_kind(docs, "Role"), by_kind(docs, "RoleBinding")
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": sa, "namespace": NAMESPACE}]
        assert binding["roleRef"]["name"] == role["metadata"]["name"]
        pods = [r for r in role["rules"] if "pods" in r["resources"]]
        assert pods and {"create", "delete", "watch", "list"} <= set(pods[0]["verbs"])


def test_credentials_only_from_secrets(rendered: tuple[str, dict[str, Any], list[dict[str, Any]]]) -> None:
    _, values, docs = rendered
    text = yaml.safe_dump_all(docs)
    assert "amqp://" not in text and "amqps://" not in text and "password" not in text.lower()
    assert not by_kind(docs, "Secret")          # the chart never creates one: credentials are the user's Secret
    pod = driver_pod(docs)
    env_from = (pod["spec"]["containers"][0] if "spec" in pod else pod)["envFrom"]
    secrets = [e["secretRef"]["name"] for e in env_from]
    assert secrets[0] == values["broker"]["existingSecret"]
    if values["results"]["objectStore"]["enabled"]:
        assert secrets[1:] == [values["results"]["objectStore"]["existingSecret"]]


def test_workload_loads_with_rbench(rendered: tuple[str, dict[str, Any], list[dict[str, Any]]],
                                    monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The rendered workload file is one rbench accepts, with URIs from the Secret's keys."""
    from rbench.config.load import load_workload

    _, values, docs = rendered
    maps = [d for d in by_kind(docs, "ConfigMap") if d["metadata"]["name"].endswith("-workload")]
    if values["workload"]["existingConfigMap"]:
        assert not maps
        return
    (cm,) = maps
    path = tmp_path / values["workload"]["key"]
    path.write_text(cm["data"][values["workload"]["key"]])
    for c in values["clusters"]:
        monkeypatch.setenv(c["uriSecretKey"], f"amqp://u:secret@{c['name']}.brokers:5672/")
    workload = load_workload(str(path))
    assert [(c.name, c.nodes, c.instance_type, c.volume_type, c.volume_gb) for c in workload.clusters] == \
        [(c["name"], c.get("nodes", 1), c.get("instanceType", "local"), c.get("volumeType", "local"), c.get("volumeGb", 0))
         for c in values["clusters"]]
    assert workload.clusters[0].uris == [f"amqp://u:secret@{values['clusters'][0]['name']}.brokers:5672/"]


def test_job_arguments_parse_with_rbench(rendered: tuple[str, dict[str, Any], list[dict[str, Any]]]) -> None:
    """jobs/nightly.py receives arguments `rbench nightly` accepts, pointing at the mounted files."""
    from rbench.cli import build_parser

    _, values, docs = rendered
    _, app_args = job_arguments(docs)
    args = build_parser().parse_args(["nightly", *app_args])
    assert args.workload == f"/etc/rbench/workload/{values['workload']['key']}"
    assert (args.out, args.history) == ("/results/runs", "/results/history")
    assert args.costs == ("/etc/rbench/costs/costs.yaml" if values["prices"] else "/opt/rbench/conf/costs.yaml")
    assert args.regress is values["history"]["regress"]
    assert args.commit == (values["history"]["commit"] or None)
    assert args.upload == (values["results"]["objectStore"]["uri"] if values["results"]["objectStore"]["enabled"] else None)
    assert args.metrics_port == (values["metrics"]["port"] if values["metrics"]["enabled"] else None)
    pod = driver_pod(docs)
    mounts = {m["mountPath"] for m in (pod["spec"]["containers"][0] if "spec" in pod else pod)["volumeMounts"]}
    assert {"/etc/rbench/workload", "/results"} <= mounts
    assert ("/etc/rbench/costs" in mounts) is bool(values["prices"])
    if values["prices"]:
        (costs,) = [d for d in by_kind(docs, "ConfigMap") if d["metadata"]["name"].endswith("-costs")]
        assert yaml.safe_load(costs["data"]["costs.yaml"]) == values["prices"]


def test_prometheus_scrape_switch(rendered: tuple[str, dict[str, Any], list[dict[str, Any]]]) -> None:
    _, values, docs = rendered
    pod = driver_pod(docs)
    annotations = (pod.get("metadata", pod)).get("annotations") or {}
    labels = (pod.get("metadata", pod))["labels"]
    m = values["metrics"]
    if m["enabled"] and m["mode"] == "annotations":
        assert annotations == {"prometheus.io/scrape": "true", "prometheus.io/port": str(m["port"]), "prometheus.io/path": "/metrics"}
    else:
        assert "prometheus.io/scrape" not in annotations
    monitors = by_kind(docs, "PodMonitor")
    if m["enabled"] and m["mode"] == "podMonitor":
        (mon,) = monitors
        assert mon["spec"]["selector"]["matchLabels"].items() <= labels.items()
        assert mon["spec"]["podMetricsEndpoints"][0]["port"] == "metrics"
        assert m["podMonitor"]["labels"].items() <= mon["metadata"]["labels"].items()
    ports = (pod["spec"]["containers"][0] if "spec" in pod else pod).get("ports", [])
    assert any(p.get("name") == "metrics" and p["containerPort"] == m["port"] for p in ports) is m["enabled"]


# ---- the operator's CRD ---------------------------------------------------------------------------
def _strict(schema: Any) -> Any:
    """The CRD's schema, rejecting fields it does not declare (as `kubectl apply --validate=strict`)."""
    if isinstance(schema, dict):
        out = {k: _strict(v) for k, v in schema.items()}
        if "properties" in out and "additionalProperties" not in out and not out.get("x-kubernetes-preserve-unknown-fields"):
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [_strict(v) for v in schema]
    return schema


@pytest.fixture(scope="module")
def ssa_validator() -> Any:
    if not SSA_CRD.exists():
        pytest.skip(f"spark-operator CRD not found at {SSA_CRD} (the shared/ folder beside the repository): "
                    "the ScheduledSparkApplication is rendered but not checked against the operator's schema")
    crd = yaml.load(SSA_CRD.read_text(), Loader=Loader)
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1beta2"]
    schema = _strict(version["schema"]["openAPIV3Schema"])
    return jsonschema.Draft7Validator(schema)


@pytest.mark.parametrize("name", [n for n, v in VALUE_SETS.items() if v.get("scheduler") == "operator"])
def test_scheduled_spark_application_matches_crd(name: str, ssa_validator: Any) -> None:
    (ssa,) = by_kind(render(VALUE_SETS[name]), "ScheduledSparkApplication")
    assert ssa["apiVersion"] == "sparkoperator.k8s.io/v1beta2"
    errors = sorted(ssa_validator.iter_errors(ssa), key=lambda e: list(e.path))
    assert not errors, "; ".join(f"{'.'.join(map(str, e.path))}: {e.message}" for e in errors[:5])


def test_crd_check_catches_a_bad_field(ssa_validator: Any) -> None:
    """The CRD check can fail: a misspelt and a mistyped field are reported."""
    (ssa,) = by_kind(render(VALUE_SETS["operator-podmonitor"]), "ScheduledSparkApplication")
    bad = copy.deepcopy(ssa)
    bad["spec"]["template"]["executor"]["instance"] = 2
    bad["spec"]["template"]["type"] = "Pyhton"
    messages = [e.message for e in ssa_validator.iter_errors(bad)]
    assert any("'instance'" in m for m in messages) and any("Pyhton" in m for m in messages)


# ---- bad values: one readable line per problem ------------------------------------------------
BAD_VALUES = [
    ({"scheduler": "cron"}, "at '/scheduler': value must be one of 'cronjob', 'operator'"),
    ({"schedule": "tonight"}, "at '/schedule'"),
    ({"concurrencyPolicy": "Allow"}, "at '/concurrencyPolicy': value must be one of 'Forbid', 'Replace'"),
    ({"spark": {"executor": {"instances": 0}}}, "at '/spark/executor/instances': minimum: got 0, want 1"),
    ({"spark": {"executor": {"memory": "2 GB"}}}, "at '/spark/executor/memory'"),
    ({"broker": {"existingSecret": "s", "password": "guest"}}, "at '/broker': additional properties 'password' not allowed"),
    ({"clusters": [{"name": "c1", "uri": "amqp://guest:guest@h/"}]}, "at '/clusters/0'"),
    ({"results": {"objectStore": {"enabled": True}}}, "at '/results/objectStore/uri'"),
    ({"metrics": {"mode": "servicemonitor"}}, "at '/metrics/mode': value must be one of 'annotations', 'podMonitor'"),
    ({"sheduler": "operator"}, "additional properties 'sheduler' not allowed"),
    ({"workload": {"spec": {"name": "w", "clusters": []}}}, "workload.spec.clusters: list the brokers under `clusters`"),
    ({"clusters": [{"name": "a", "uriSecretKey": "A"}, {"name": "a", "uriSecretKey": "B"}]}, 'clusters: the name "a" is used twice'),
    ({"clusters": []}, "clusters: an inline workload (workload.spec) needs at least one cluster"),
]


@pytest.mark.parametrize(("values", "message"), BAD_VALUES, ids=[m.split(":")[0][:40] for _, m in BAD_VALUES])
def test_bad_values_rejected_readably(values: dict[str, Any], message: str) -> None:
    with pytest.raises(helm.HelmError) as caught:
        render(values)
    text = str(caught.value)
    assert message in text
    assert "guest" not in text                         # a password typed into values is not echoed back
    assert "goroutine" not in text and "Traceback" not in text


def test_chart_lints_and_every_value_is_described() -> None:
    result = helm.lint(str(CHART))
    assert not result["errors"], result
    with helm.Chart.load(CHART) as chart:
        schema, defaults = chart.schema, chart.values
    assert schema is not None

    def walk(node: dict[str, Any], values: Any, path: str) -> None:
        assert node.get("description") or path == "", f"{path}: no description in values.schema.json"
        for key, sub in node.get("properties", {}).items():
            walk(sub, values.get(key) if isinstance(values, dict) else None, f"{path}.{key}")
        if isinstance(values, dict) and "properties" in node:
            missing = set(values) - set(node["properties"])
            assert not missing, f"{path}: values.yaml keys without a schema entry: {missing}"

    walk(schema, defaults, "")


def test_renderer_is_the_pinned_helm() -> None:
    """Rendering output depends on Helm's version: the test extra pins helm-python-sdk (Helm v4)."""
    assert helm.helm_sdk_version().startswith("v4."), helm.helm_sdk_version()


def test_the_chart_ships_the_committed_dashboard() -> None:
    """The dashboard ConfigMap carries dashboards/rbench-run.json byte for byte (`make dashboards` writes both)."""
    docs = render(merged({}))
    (cm,) = [d for d in by_kind(docs, "ConfigMap") if d["metadata"]["name"].endswith("-dashboard")]
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    committed = (ROOT / "dashboards" / "rbench-run.json").read_text()
    assert json.loads(cm["data"]["rbench-run.json"]) == json.loads(committed)
    assert (CHART / "dashboards" / "rbench-run.json").read_text() == committed
    off = render(merged({"metrics": {"grafanaDashboard": {"enabled": False}}}))
    assert not [d for d in by_kind(off, "ConfigMap") if d["metadata"]["name"].endswith("-dashboard")]
