"""deploy/: the Kubernetes manifests against the Kubernetes JSON schemas
(kubernetes-validate, strict: unknown fields are errors), compose.yaml
against the compose-spec schema (check-jsonschema's vendored copy),
nginx.conf through `nginx -t`, the config the ConfigMap and the image carry
through the real daemon, and the timings that must agree with each other
(probes, preStop, drain, grace periods)."""
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile

import pytest

from conftest import BIN, MODELS, ROOT, Daemon, request

yaml = pytest.importorskip("yaml", reason="PyYAML comes with kubernetes-validate in the test venv "
                                          "(scripts/install-deps)")

DEPLOY = os.path.join(ROOT, "deploy")
K8S = os.path.join(DEPLOY, "k8s")
VENV_BIN = os.path.dirname(sys.executable)


def tool(name):
    path = os.path.join(VENV_BIN, name)
    assert os.access(path, os.X_OK), "%s missing: scripts/install-deps puts it in the test venv" % name
    return path


def manifests():
    out = {}
    for f in sorted(os.listdir(K8S)):
        if f.endswith(".yaml"):
            with open(os.path.join(K8S, f)) as fh:
                for doc in yaml.safe_load_all(fh):
                    out[(doc["kind"], doc["metadata"]["name"])] = doc
    return out


def test_k8s_manifests_match_the_kubernetes_schemas():
    files = [os.path.join(K8S, f) for f in sorted(os.listdir(K8S)) if f.endswith(".yaml")]
    assert len(files) >= 5
    r = subprocess.run([tool("kubernetes-validate"), "--strict", *files], capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    kinds = {k for k, _ in manifests()}
    for k in ("Deployment", "Service", "HorizontalPodAutoscaler", "PodDisruptionBudget",
              "ConfigMap"):
        assert k in kinds, k


def test_k8s_schema_check_can_fail(tmp_path):
    """The validator rejects a Deployment with an unknown field (--strict)
    and one with a wrong type: the test above can fail."""
    dep = manifests()[("Deployment", "inferd")]
    bad = json.loads(json.dumps(dep))
    bad["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["httpGett"] = {}
    wrong = json.loads(json.dumps(dep))
    wrong["spec"]["replicas"] = "two"
    for i, doc in enumerate((bad, wrong)):
        p = tmp_path / ("bad%d.yaml" % i)
        p.write_text(yaml.safe_dump(doc))
        r = subprocess.run([tool("kubernetes-validate"), "--strict", str(p)], capture_output=True,
                           text=True)
        assert r.returncode != 0, r.stdout


def test_k8s_probes_and_shutdown_timings_agree():
    m = manifests()
    dep = m[("Deployment", "inferd")]
    pod = dep["spec"]["template"]["spec"]
    c = pod["containers"][0]
    assert c["readinessProbe"]["httpGet"]["path"] == "/v2/health/ready"
    assert c["livenessProbe"]["httpGet"]["path"] == "/v2/health/live"
    sp = c["startupProbe"]
    assert sp["httpGet"]["path"] == "/v2/health/ready"
    assert sp["periodSeconds"] * sp["failureThreshold"] >= 120  # model load allowance
    cfg = json.loads(m[("ConfigMap", "inferd-config")]["data"]["inferd.json"])
    drain_s = cfg["limits"]["drain_timeout_ms"] / 1000
    cmd = c["lifecycle"]["preStop"]["exec"]["command"]
    assert cmd[0] == "sleep"
    pre_s = float(cmd[1])
    assert pre_s + drain_s < pod["terminationGracePeriodSeconds"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
    assert c["resources"]["requests"] == c["resources"]["limits"]  # Guaranteed
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert c[probe].get("timeoutSeconds", 1) >= 3, probe
    assert "replicas" not in dep["spec"]  # the HPA owns the count
    # the ConfigMap's replicas use the CPUs the limit gives (no more threads)
    cpus = int(c["resources"]["limits"]["cpu"])
    for mo in json.loads(m[("ConfigMap", "inferd-config")]["data"]["inferd.json"])["models"]:
        assert sum(r["threads"] for r in mo["replicas"]) == cpus, mo
    assert {e["name"]: e.get("value") for e in c["env"]}["INFERD_CONFIG"] == "/etc/inferd/inferd.json"
    mounts = {v["mountPath"]: v for v in c["volumeMounts"]}
    assert "/etc/inferd" in mounts and "/models" in mounts
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    svc = m[("Service", "inferd")]
    assert {p["targetPort"] for p in svc["spec"]["ports"]} <= set(ports)
    sel = dep["spec"]["selector"]["matchLabels"]
    assert svc["spec"]["selector"] == sel
    assert m[("PodDisruptionBudget", "inferd")]["spec"]["selector"]["matchLabels"] == sel
    hpa = m[("HorizontalPodAutoscaler", "inferd")]["spec"]
    assert hpa["scaleTargetRef"]["name"] == dep["metadata"]["name"]
    assert hpa["minReplicas"] >= 2  # with maxUnavailable 1, a drain keeps one pod serving


def local_config(cfg):
    """cfg with /models paths moved to the local models folder."""
    cfg = json.loads(json.dumps(cfg))
    for mo in cfg["models"]:
        assert mo["path"].startswith("/models/"), mo["path"]
        mo["path"] = os.path.join(MODELS, mo["path"][len("/models/"):])
    cfg["listen"] = "127.0.0.1:0"
    if cfg.get("grpc_listen"):
        cfg["grpc_listen"] = "127.0.0.1:0"
    return cfg


@pytest.mark.parametrize("source", ["configmap", "image"])
def test_shipped_configs_run_the_daemon(source):
    """The ConfigMap's and the image's (deploy/inferd.json) configurations
    load both default models in the real daemon."""
    if source == "configmap":
        cfg = json.loads(manifests()[("ConfigMap", "inferd-config")]["data"]["inferd.json"])
    else:
        with open(os.path.join(DEPLOY, "inferd.json")) as f:
            cfg = json.load(f)
    d = Daemon(local_config(cfg))
    try:
        r = request(d.port, "GET", "/v2/health/ready")
        assert r.status == 200, r.body
        r = request(d.port, "GET", "/v1/models")
        names = {m["id"] for m in r.json()["data"]}
        assert names == {"whisper-tiny.en", "gemma-3-270m", "smollm2-135m-instruct"}
    finally:
        assert d.stop() == 0, d.stderr_text()


def test_compose_matches_the_compose_spec():
    path = os.path.join(DEPLOY, "compose.yaml")
    r = subprocess.run([tool("check-jsonschema"), "--builtin-schema", "vendor.compose-spec", path],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    with open(path) as f:
        c = yaml.safe_load(f)
    inf = c["services"]["inferd"]
    grace = int(re.fullmatch(r"(\d+)s", inf["stop_grace_period"]).group(1))
    with open(os.path.join(DEPLOY, "inferd.json")) as f:
        drain_ms = json.load(f).get("limits", {}).get("drain_timeout_ms", 30000)
    assert grace > drain_ms / 1000
    assert any(v.endswith(":/models:ro") for v in inf["volumes"])
    # the models folder must be given, absolute (a relative path or the
    # checkout's symlinks do not reach into a container)
    assert c["volumes"]["models"]["driver_opts"]["device"].startswith("${INFERD_MODELS_DIR:?")
    assert "/v2/health/ready" in " ".join(inf["healthcheck"]["test"])
    assert c["services"]["nginx"]["depends_on"]["inferd"]["condition"] == "service_healthy"
    # and the schema check can fail: a service with a misspelt key
    bad = json.loads(json.dumps(c))
    bad["services"]["inferd"]["restrat"] = "always"
    with tempfile.NamedTemporaryFile("w", suffix=".yaml") as f:
        yaml.safe_dump(bad, f)
        f.flush()
        r = subprocess.run([tool("check-jsonschema"), "--builtin-schema", "vendor.compose-spec",
                            f.name], capture_output=True, text=True)
        assert r.returncode != 0


def test_nginx_conf_passes_nginx_t(tmp_path):
    nginx = shutil.which("nginx") or "/usr/sbin/nginx"
    assert os.access(nginx, os.X_OK), "nginx missing: scripts/install-deps installs it"
    with open(os.path.join(DEPLOY, "nginx.conf")) as f:
        conf = f.read()
    assert "proxy_next_upstream" in conf and "least_conn" in conf and "grpc_pass" in conf
    # inferd's own 504 (the request's deadline passed) is not retried elsewhere
    assert not any("http_504" in line for line in conf.splitlines()
                   if "next_upstream " in line), conf
    # Docker's DNS names are not here: point them at loopback
    conf = conf.replace("inferd:8080", "127.0.0.1:8080").replace("inferd:8081", "127.0.0.1:8081")
    ports = []
    for _ in range(2):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            ports.append(sock.getsockname()[1])
    conf = conf.replace("listen 8080;", "listen 127.0.0.1:%d;" % ports[0])
    conf = conf.replace("listen 8081 http2;", "listen 127.0.0.1:%d http2;" % ports[1])
    conf = "pid %s/nginx.pid;\nerror_log %s/error.log;\n" % (tmp_path, tmp_path) + conf
    p = tmp_path / "nginx.conf"
    p.write_text(conf)
    r = subprocess.run([nginx, "-t", "-p", str(tmp_path), "-c", str(p)], capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stderr
