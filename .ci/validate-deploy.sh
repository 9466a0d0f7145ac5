#!/usr/bin/env bash
# Validates what deploy/ ships, offline:
#   1. renders deploy/kubernetes/base and both overlays with kustomize (`kubectl kustomize`); deploy/argocd, a
#      Component, inside a stand-in for an operator's Argo CD kustomization; overlays/single with the knobs (patches)
#      that deploy/kubernetes/README.md documents; every example overlay under deploy/kubernetes/examples/ (the common
#      values: image, replicas, store, Secrets, Ingress, ServiceMonitor), whose text the README must show as it is;
#   2. validates every built-in object (and deploy/kubernetes/namespace.yaml, the Argo CD patch and the example
#      Secrets) against the Kubernetes JSON schemas shipped inside the PyPI package kubernetes-validate (strict:
#      unknown fields are errors), for the oldest and newest Kubernetes versions we target;
#   3. checks the Prometheus Operator objects (CRDs, which those schemas do not cover) on their own: ServiceMonitor
#      against the Service, PrometheusRule with `promtool check rules` and `promtool test rules` (Debian `prometheus`),
#      and every herald_* metric an alert uses against the metrics Herald's source registers;
#   4. checks that the pieces fit: Service ↔ pods ↔ probes ↔ PDB ↔ NetworkPolicy, Secrets the Deployment reads ↔ the
#      example Secrets, the Argo CD webhook URL ↔ the Service, replicas/strategy per overlay, the image placeholder; and
#      that the Argo CD kit leaves the operator's keys alone: the Component merges into their ConfigMap and refuses one
#      that has its own `subscriptions`, and a merge patch install followed by deploy/argocd/uninstall.sh (against
#      `kubectl patch --local`) restores it exactly;
#      each example has its effect; the Ingress example reaches the Service; the Argo CD Application's fields, namespace and the overlay it names,
#      rendered with the image it sets; components/instances on each overlay: every instance's ingest token from its
#      own Secret key, bound in the file, no HERALD__SERVER__AUTH__INGEST_TOKENS (and check-config refusing it);
#   5. runs `herald check-config` on the herald.yaml of each overlay's ConfigMap with the overlay's (and the image's)
#      HERALD__* variables set, so a misspelt variable or key fails; and checks that every HERALD__* name written
#      anywhere in deploy/ or the Dockerfile is a real configuration key.
# Idempotent: installs what is missing (pip into a cache venv, apt), quietly. Exits non-zero on any problem.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
CACHE="${HERALD_CI_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/herald-ci}"
VENV="$CACHE/venv-deploy"
KV_VERSION="1.37.0"              # kubernetes-validate: ships schemas up to Kubernetes 1.37
K8S_VERSIONS=("1.29.0" "1.37.0") # oldest and newest Kubernetes the manifests must be valid for
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT

say() { printf 'validate-deploy: %s\n' "$*"; }
die() { printf 'validate-deploy: FAILED: %s\n' "$*" >&2; exit 1; }

apt_install() {
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  if ! $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >"$WORK/apt.log" 2>&1; then
    $sudo apt-get update -qq >"$WORK/apt.log" 2>&1 || true
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >"$WORK/apt.log" 2>&1 \
      || { cat "$WORK/apt.log" >&2; die "apt-get install $* failed"; }
  fi
}

# --- tools -----------------------------------------------------------------------------------------------------------
# Renderer: kubectl's built-in kustomize (kustomize v5 is needed for `patches:`/`labels:`/Components), else a
# standalone kustomize, else Debian's kubernetes-client.
if command -v kubectl >/dev/null 2>&1; then
  RENDER=(kubectl kustomize)
  RENDERER="kubectl $(kubectl version --client 2>/dev/null | sed -n 's/^Kustomize Version: /(kustomize /p' | tr -d '\n'))"
elif command -v kustomize >/dev/null 2>&1; then
  RENDER=(kustomize build)
  RENDERER="kustomize $(kustomize version 2>/dev/null | head -1)"
else
  apt_install kubernetes-client
  RENDER=(kubectl kustomize)
  RENDERER="kubectl from Debian kubernetes-client (its kustomize may be too old for deploy/)"
fi

# kubectl itself: section 4 runs deploy/argocd/uninstall.sh against `kubectl patch --local`.
command -v kubectl >/dev/null 2>&1 || apt_install kubernetes-client

if ! "$VENV/bin/python" -c "import kubernetes_validate, sys; sys.exit(kubernetes_validate.__version__ != '$KV_VERSION')" 2>/dev/null; then
  rm -rf "$VENV"
  python3 -m venv "$VENV" || die "python3 -m venv failed (Debian: apt-get install python3-venv)"
  "$VENV/bin/pip" install -q --disable-pip-version-check "kubernetes-validate==$KV_VERSION" >"$WORK/pip.log" 2>&1 \
    || { cat "$WORK/pip.log" >&2; die "pip install kubernetes-validate failed"; }
fi

command -v promtool >/dev/null 2>&1 || apt_install prometheus
PROMTOOL_VERSION="$(promtool --version 2>&1 | head -1 | awk '{print $3}')"

# The herald binary, for check-config: the debug build the tests use (incremental).
cargo build -q --bin herald
HERALD_BIN="$(cargo metadata --format-version 1 --no-deps | "$VENV/bin/python" -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')/debug/herald"
[ -x "$HERALD_BIN" ] || die "no herald binary at $HERALD_BIN"

say "renderer: $RENDERER; schemas: kubernetes-validate $KV_VERSION (Kubernetes ${K8S_VERSIONS[*]}, strict); rules: promtool $PROMTOOL_VERSION"

# --- 1. render -------------------------------------------------------------------------------------------------------
# deploy/argocd is a Component (it owns no object) and is rendered in section 4, inside a stand-in kustomization.
TARGETS=(deploy/kubernetes/base deploy/kubernetes/overlays/single deploy/kubernetes/overlays/ha)
for t in "${TARGETS[@]}"; do
  out="$WORK/$(echo "$t" | tr '/' '_').yaml"
  "${RENDER[@]}" "$t" >"$out" 2>"$WORK/render.log" || { cat "$WORK/render.log" >&2; die "cannot render $t"; }
done

# The uninstall script runs against real clusters: its syntax here, its behaviour in section 4.
bash -n deploy/argocd/uninstall.sh || die "deploy/argocd/uninstall.sh does not parse"
if command -v shellcheck >/dev/null 2>&1; then
  shellcheck deploy/argocd/uninstall.sh || die "shellcheck deploy/argocd/uninstall.sh"
fi

# --- 2-5. validate ---------------------------------------------------------------------------------------------------
export ROOT WORK HERALD_BIN PROMTOOL=promtool RENDER_CMD="${RENDER[*]}"
export K8S_VERSION_LIST="${K8S_VERSIONS[*]}"
"$VENV/bin/python" - <<'PY'
import glob, json, os, re, shutil, subprocess, sys
import yaml
from kubernetes_validate import utils as kv

ROOT, WORK = os.environ["ROOT"], os.environ["WORK"]
VERSIONS = os.environ["K8S_VERSION_LIST"].split()
CRD_GROUPS = ("monitoring.coreos.com/",)
ARGOCD_PATCH = "deploy/argocd/argocd-notifications-cm.patch.yaml"
problems = []


def fail(msg):
    problems.append(msg)
    print(f"  FAIL {msg}")


def load(path):
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d]


def one(docs, kind, name_prefix=""):
    found = [d for d in docs if d["kind"] == kind and d["metadata"]["name"].startswith(name_prefix)]
    return found[0] if len(found) == 1 else None


def rendered(target):
    return load(os.path.join(WORK, target.replace("/", "_") + ".yaml"))


# 2. Built-in kinds against the shipped schemas.
def validate_schema(docs, label):
    checked, crds = 0, []
    for d in docs:
        if d["apiVersion"].startswith(CRD_GROUPS):
            crds.append(d)
            continue
        for v in VERSIONS:
            try:
                kv.validate(d, v, strict=True)
            except kv.ValidationError as e:
                path = ".".join(str(p) for p in e.path)
                fail(f"{label}: {d['kind']}/{d['metadata']['name']} (Kubernetes {v}): {path}: {e.message}")
            except kv.SchemaNotFoundError as e:
                fail(f"{label}: {e.message}")
        checked += 1
    return checked, crds


metrics_in_source = set()
for path in glob.glob(os.path.join(ROOT, "src/**/*.rs"), recursive=True):
    text = open(path).read()
    metrics_in_source |= set(re.findall(r'(?:counter|gauge|histogram)!\(\s*"(herald_[a-z_]+)"', text))
    # Scrape-time gauges rendered by telemetry::render_gauges: family("herald_…", help, rows)
    metrics_in_source |= set(re.findall(r'\bfamily\(\s*"(herald_[a-z_]+)"', text))


def metric_names(expr):
    names = set()
    for n in re.findall(r"\b(herald_[a-z_]+)\b", expr):
        # A histogram is exposed as _bucket/_sum/_count series.
        base = re.sub(r"_(bucket|sum|count)$", "", n)
        names.add(base if base in metrics_in_source else n)
    return names


# 3. Prometheus Operator objects.
def check_monitoring(docs, label):
    svc = one(docs, "Service", "herald")
    sm = one(docs, "ServiceMonitor", "herald")
    rule = one(docs, "PrometheusRule", "herald")
    if not (sm and rule):
        fail(f"{label}: expected one ServiceMonitor and one PrometheusRule named herald")
        return
    sel = sm["spec"]["selector"].get("matchLabels", {})
    if not svc or any(svc["metadata"].get("labels", {}).get(k) != v for k, v in sel.items()):
        fail(f"{label}: ServiceMonitor selector {sel} does not select the Service herald")
    ports = {p.get("name") for p in (svc or {}).get("spec", {}).get("ports", [])}
    for ep in sm["spec"]["endpoints"]:
        if ep.get("port") not in ports:
            fail(f"{label}: ServiceMonitor endpoint port {ep.get('port')!r} is not a Service port {sorted(ports)}")
        if ep.get("path") != "/metrics":
            fail(f"{label}: ServiceMonitor path {ep.get('path')!r}, Herald serves /metrics")
    alerts = {}
    for g in rule["spec"]["groups"]:
        for r in g["rules"]:
            alerts[r.get("alert")] = r
            for m in metric_names(r["expr"]) - metrics_in_source:
                fail(f"{label}: alert {r.get('alert')} uses {m}, which Herald does not export")
            if r.get("labels", {}).get("severity") not in ("info", "warning", "critical"):
                fail(f"{label}: alert {r.get('alert')} has no severity label")
    for needed in ("HeraldDeadNotifications", "HeraldReceiverFailing", "HeraldIngestErrors", "HeraldDown",
                   "HeraldCredentialsRefused", "HeraldEventsRejected", "HeraldNoEvents", "HeraldArgoCdApiDown",
                   "HeraldArgoCdPermissionDenied", "HeraldReloadRefused", "HeraldDeliveriesStuck",
                   "HeraldDigestSkipped"):
        if needed not in alerts:
            fail(f"{label}: no alert {needed}")
    rules_file = os.path.join(WORK, f"rules_{label}.yaml")
    with open(rules_file, "w") as f:
        yaml.safe_dump({"groups": rule["spec"]["groups"]}, f)
    # The unit tests check when alerts fire and with which labels; `check rules` above covers the annotations'
    # templates, so the tested copy drops them (promtool would otherwise compare every annotation's text).
    bare = [{**g, "rules": [{k: v for k, v in r.items() if k != "annotations"} for r in g["rules"]]}
            for g in rule["spec"]["groups"]]
    bare_file = os.path.join(WORK, f"rules_{label}_bare.yaml")
    with open(bare_file, "w") as f:
        yaml.safe_dump({"groups": bare}, f)
    for args in (["check", "rules", rules_file], ["test", "rules", write_rule_tests(bare_file)]):
        p = subprocess.run([os.environ["PROMTOOL"], *args], capture_output=True, text=True)
        if p.returncode != 0:
            fail(f"{label}: promtool {' '.join(args[:2])}:\n{p.stdout}{p.stderr}")


def write_rule_tests(rules_file):
    """Each alert fires on the situation it describes, and stays quiet on a healthy Herald."""
    tests = {
        "rule_files": [os.path.basename(rules_file)],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": [
                    {"series": 'up{job="herald", namespace="herald", pod="a"}', "values": "1x30"},
                    {"series": 'herald_outbox{job="herald", namespace="herald", pod="a", receiver="slack", state="dead"}',
                     "values": "0x5 2x25"},
                    {"series": 'herald_outbox{job="herald", namespace="herald", pod="b", receiver="slack", state="dead"}',
                     "values": "0x5 2x25"},
                    {"series": 'herald_deliveries_total{job="herald", namespace="herald", pod="a", receiver="jira", outcome="retry"}',
                     "values": "0+1x30"},
                    {"series": 'herald_deliveries_total{job="herald", namespace="herald", pod="a", receiver="jira", outcome="delivered"}',
                     "values": "0+5x30"},
                    {"series": 'herald_events_received_total{job="herald", namespace="herald", pod="a", outcome="unavailable"}',
                     "values": "0x20 1x10"},
                    {"series": 'herald_events_received_total{job="herald", namespace="herald", pod="a", outcome="accepted"}',
                     "values": "0+100x30"},
                ],
                "alert_rule_test": [
                    {"eval_time": "4m", "alertname": "HeraldDeadNotifications", "exp_alerts": []},
                    {"eval_time": "10m", "alertname": "HeraldDeadNotifications", "exp_alerts": [
                        {"exp_labels": {"severity": "warning", "namespace": "herald", "receiver": "slack"}}]},
                    {"eval_time": "25m", "alertname": "HeraldReceiverFailing", "exp_alerts": [
                        {"exp_labels": {"severity": "warning", "namespace": "herald", "receiver": "jira"}}]},
                    {"eval_time": "15m", "alertname": "HeraldIngestErrors", "exp_alerts": []},
                    {"eval_time": "22m", "alertname": "HeraldIngestErrors", "exp_alerts": [
                        {"exp_labels": {"severity": "warning", "namespace": "herald"}}]},
                    {"eval_time": "20m", "alertname": "HeraldDown", "exp_alerts": []},
                ],
            },
            {
                "interval": "1m",
                "input_series": [{"series": 'up{job="herald", namespace="herald", pod="a"}', "values": "1x5 0x20"}],
                "alert_rule_test": [
                    {"eval_time": "5m", "alertname": "HeraldDown", "exp_alerts": []},
                    {"eval_time": "15m", "alertname": "HeraldDown", "exp_alerts": [
                        {"exp_labels": {"severity": "critical"}}]},
                ],
            },
            # The silent failures: each fires on its situation (second half) and not on a healthy Herald (first).
            {
                "interval": "1m",
                "input_series": [
                    {"series": 'herald_auth_failures_total{job="herald", namespace="herald", pod="a", reason="unknown_token"}',
                     "values": "0x40 0+5x50"},
                    {"series": 'herald_events_received_total{job="herald", namespace="herald", pod="a", outcome="rejected"}',
                     "values": "0x40 1x50"},
                    # Bodies every minute until 40m, then none (the gauge keeps its last time, in seconds).
                    {"series": 'herald_last_event_timestamp_seconds{job="herald", namespace="herald", pod="a"}',
                     "values": "0+60x40 2400x90"},
                    {"series": 'herald_applications{job="herald", namespace="herald", pod="a", sync="Synced", health="Healthy"}',
                     "values": "5x130"},
                    {"series": 'herald_argocd_api_up{job="herald", namespace="herald", pod="a", argocd_instance="default"}', "values": "1x40 0x50"},
                    {"series": 'herald_argocd_api_up{job="herald", namespace="herald", pod="b", argocd_instance="default"}', "values": "1x40 0x50"},
                    # A second instance whose API stays up: the first one's being down still alerts.
                    {"series": 'herald_argocd_api_up{job="herald", namespace="herald", pod="a", argocd_instance="eu"}', "values": "1x90"},
                    # The lister sees project beta denied from 40m; another replica never asked about it.
                    {"series": 'herald_argocd_permission_denied{job="herald", namespace="herald", pod="a", argocd_instance="default", project="beta"}',
                     "values": "0x40 1x50"},
                    {"series": 'herald_argocd_permission_denied{job="herald", namespace="herald", pod="a", argocd_instance="default", project="alpha"}',
                     "values": "0x90"},
                    {"series": 'herald_config_reloads_total{job="herald", namespace="herald", pod="a", outcome="refused"}',
                     "values": "0x40 1x50"},
                    {"series": 'herald_outbox_oldest_pending_age_seconds{job="herald", namespace="herald", pod="a"}',
                     "values": "30x40 0+60x50"},
                    {"series": 'herald_digest_slots_total{job="herald", namespace="herald", pod="a", state="skipped"}',
                     "values": "0x40 1x50"},
                ],
                "alert_rule_test": [
                    *[{"eval_time": "39m", "alertname": a, "exp_alerts": []} for a in (
                        "HeraldCredentialsRefused", "HeraldEventsRejected", "HeraldNoEvents", "HeraldArgoCdApiDown",
                        "HeraldArgoCdPermissionDenied", "HeraldReloadRefused", "HeraldDeliveriesStuck",
                        "HeraldDigestSkipped")],
                    {"eval_time": "45m", "alertname": "HeraldArgoCdPermissionDenied", "exp_alerts": [
                        {"exp_labels": {"severity": "warning", "namespace": "herald", "argocd_instance": "default",
                                        "project": "beta"}}]},
                    {"eval_time": "50m", "alertname": "HeraldCredentialsRefused", "exp_alerts": [
                        {"exp_labels": {"severity": "warning", "namespace": "herald"}}]},
                    {"eval_time": "45m", "alertname": "HeraldEventsRejected", "exp_alerts": [
                        {"exp_labels": {"severity": "warning", "namespace": "herald"}}]},
                    # The last body at 40m: over an hour at 100m, alerting from 110m.
                    {"eval_time": "105m", "alertname": "HeraldNoEvents", "exp_alerts": []},
                    {"eval_time": "115m", "alertname": "HeraldNoEvents", "exp_alerts": [
                        {"exp_labels": {"severity": "warning", "namespace": "herald"}}]},
                    {"eval_time": "55m", "alertname": "HeraldArgoCdApiDown", "exp_alerts": [
                        {"exp_labels": {"severity": "warning", "namespace": "herald", "argocd_instance": "default"}}]},
                    {"eval_time": "45m", "alertname": "HeraldReloadRefused", "exp_alerts": [
                        {"exp_labels": {"severity": "warning", "namespace": "herald"}}]},
                    {"eval_time": "65m", "alertname": "HeraldDeliveriesStuck", "exp_alerts": [
                        {"exp_labels": {"severity": "warning", "namespace": "herald"}}]},
                    {"eval_time": "45m", "alertname": "HeraldDigestSkipped", "exp_alerts": [
                        {"exp_labels": {"severity": "info", "namespace": "herald"}}]},
                ],
            },
        ],
    }
    path = rules_file.replace(".yaml", "_test.yaml")
    with open(path, "w") as f:
        yaml.safe_dump(tests, f)
    return path


# 4. The pieces fit together.
def example_secret_keys():
    keys = {}
    for path in glob.glob(os.path.join(ROOT, "deploy/**/*.example.yaml"), recursive=True):
        for d in load(path):
            if d["kind"] == "Secret":
                keys[d["metadata"]["name"]] = set(d.get("stringData", {})) | set(d.get("data", {}))
    return keys


def example_secret_values():
    values = {}
    for path in glob.glob(os.path.join(ROOT, "deploy/**/*.example.yaml"), recursive=True):
        for d in load(path):
            if d["kind"] == "Secret":
                values[d["metadata"]["name"]] = dict(d.get("stringData", {}))
    return values


def container(deploy):
    return next(c for c in deploy["spec"]["template"]["spec"]["containers"] if c["name"] == "herald")


def check_wiring(docs, label):
    deploy, svc, pdb = one(docs, "Deployment", "herald"), one(docs, "Service", "herald"), one(docs, "PodDisruptionBudget")
    netpol = one(docs, "NetworkPolicy", "herald")
    if not (deploy and svc and pdb and netpol):
        fail(f"{label}: expected one Deployment, Service, PodDisruptionBudget and NetworkPolicy")
        return
    if any(d["kind"] == "Namespace" for d in docs):
        fail(f"{label}: renders a Namespace; `kubectl delete -k` would delete it with the Secrets in it")
    pod = deploy["spec"]["template"]
    pod_labels = pod["metadata"]["labels"]
    for what, sel in (("Service", svc["spec"]["selector"]), ("PodDisruptionBudget", pdb["spec"]["selector"]["matchLabels"]),
                      ("Deployment selector", deploy["spec"]["selector"]["matchLabels"]),
                      ("NetworkPolicy", netpol["spec"]["podSelector"].get("matchLabels", {}))):
        if any(pod_labels.get(k) != v for k, v in sel.items()):
            fail(f"{label}: {what} {sel} does not select the pods {pod_labels}")
    c = container(deploy)
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    check_network_policy(netpol, ports, label)
    if c["image"].split(":")[0] == "herald":
        fail(f"{label}: image {c['image']!r} has no registry; the overlay must set one (`kustomize edit set image`)")
    for p in svc["spec"]["ports"]:
        if p["targetPort"] not in ports and p["targetPort"] not in ports.values():
            fail(f"{label}: Service targetPort {p['targetPort']} is not a container port")
    for probe, path in (("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")):
        got = c.get(probe, {}).get("httpGet", {})
        if got.get("path") != path or got.get("port") not in ports:
            fail(f"{label}: {probe} should GET {path} on a container port, is {got}")
    sc = c.get("securityContext", {})
    for k, v in (("readOnlyRootFilesystem", True), ("allowPrivilegeEscalation", False), ("runAsNonRoot", True)):
        if sc.get(k) != v:
            fail(f"{label}: container securityContext.{k} should be {v}")
    secrets = example_secret_keys()
    for e in c.get("env", []):
        ref = e.get("valueFrom", {}).get("secretKeyRef")
        if ref and ref["key"] not in secrets.get(ref["name"], set()):
            fail(f"{label}: env {e['name']} reads Secret {ref['name']} key {ref['key']}, which no *.example.yaml defines")
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    for m in c.get("volumeMounts", []):
        if m["name"] not in volumes:
            fail(f"{label}: volumeMount {m['name']} has no volume")
    config = volumes.get("config", {})
    cm = config.get("configMap", {}).get("name")
    # A Secret holding herald.yaml (README "Open the status page") is created by hand, like herald-auth.
    if "secret" not in config and not one(docs, "ConfigMap", cm or "-"):
        fail(f"{label}: the config volume names ConfigMap {cm}, which is not rendered")
    replicas = deploy["spec"].get("replicas", 1)
    strategy = deploy["spec"].get("strategy", {}).get("type")
    if label.endswith("single"):
        claim = volumes.get("data", {}).get("persistentVolumeClaim", {}).get("claimName")
        if replicas != 1 or strategy != "Recreate" or not one(docs, "PersistentVolumeClaim", claim or "-"):
            fail(f"{label}: needs 1 replica, strategy Recreate and /data on a rendered PVC")
    if label.endswith("ha"):
        url = next((e for e in c["env"] if e["name"] == "HERALD__STORAGE__URL"), {})
        if replicas < 2 or "secretKeyRef" not in url.get("valueFrom", {}):
            fail(f"{label}: needs 2+ replicas and HERALD__STORAGE__URL from a Secret")
        if pdb["spec"].get("minAvailable") != 1 or "maxUnavailable" in pdb["spec"]:
            fail(f"{label}: the PodDisruptionBudget should be minAvailable: 1")
        if not pod["spec"].get("topologySpreadConstraints") and not pod["spec"].get("affinity"):
            fail(f"{label}: replicas should be spread over nodes")
    return svc


def check_network_policy(netpol, container_ports, label):
    """Ingress only (egress stays open for receivers), to container ports, from Argo CD's namespace and Prometheus'."""
    spec = netpol["spec"]
    if spec.get("policyTypes") != ["Ingress"]:
        fail(f"{label}: NetworkPolicy policyTypes {spec.get('policyTypes')}; egress is documented as open")
    sources = []
    for rule in spec.get("ingress", []):
        for p in rule.get("ports", []):
            if p.get("port") not in container_ports and p.get("port") not in container_ports.values():
                fail(f"{label}: NetworkPolicy admits port {p.get('port')}, not a container port {container_ports}")
        for peer in rule.get("from", [{}]):
            sources.append(peer.get("namespaceSelector", {}).get("matchLabels", {}).get("kubernetes.io/metadata.name", "*"))
    argocd_ns = yaml.safe_load(open(os.path.join(ROOT, ARGOCD_PATCH)))["metadata"]["namespace"]
    if argocd_ns not in sources and "*" not in sources:
        fail(f"{label}: NetworkPolicy admits {sources}, not Argo CD's namespace {argocd_ns}")
    if len(spec.get("ingress", [])) < 2:
        fail(f"{label}: NetworkPolicy should admit Prometheus (a second ingress rule)")


def check_argocd_url(svc, docs_argocd):
    cm = one(docs_argocd, "ConfigMap", "argocd-notifications-cm")
    service = yaml.safe_load(cm["data"]["service.webhook.herald"])
    m = re.match(r"https?://([^./:]+)\.([^./:]+)\.svc(?:\.cluster\.local)?:(\d+)/", service["url"])
    ports = [p["port"] for p in svc["spec"]["ports"]]
    if not m or (m.group(1), m.group(2)) != (svc["metadata"]["name"], svc["metadata"]["namespace"]) \
            or int(m.group(3)) not in ports:
        fail(f"argocd: webhook URL {service['url']} does not reach Service "
             f"{svc['metadata']['namespace']}/{svc['metadata']['name']} ports {ports}")


# 5. HERALD__* variables are real configuration keys.
def image_env():
    env = {}
    text = open(os.path.join(ROOT, "Dockerfile")).read().replace("\\\n", " ")
    for line in text.splitlines():
        if line.startswith("ENV "):
            env.update(dict(re.findall(r"(HERALD__[A-Z0-9_]+)=(\S+)", line)))
    return env


PLACEHOLDERS = {"HERALD__STORAGE__URL": "postgres://herald:placeholder@postgres:5432/herald",
                "HERALD__SERVER__AUTH__BASIC__0__SCOPE": "admin"}


def run_check_config(docs, label, extra_env=None):
    """`herald check-config` on the rendered ConfigMap's herald.yaml with the Deployment's HERALD__* variables (and
    the image's), and every mounted Secret that an example defines present as files (its placeholders), at a path
    of WORK written over the mount path in the file."""
    deploy = one(docs, "Deployment", "herald")
    cm = one(docs, "ConfigMap", "herald-config")
    text = cm["data"]["herald.yaml"]
    c = container(deploy)
    volumes = {v["name"]: v for v in deploy["spec"]["template"]["spec"]["volumes"]}
    secrets = example_secret_values()
    for m in c.get("volumeMounts", []):
        name = volumes.get(m["name"], {}).get("secret", {}).get("secretName")
        if name not in secrets:
            continue
        d = os.path.join(WORK, "mounts", label.replace("/", "_"), m["name"])
        os.makedirs(d, exist_ok=True)
        for key, value in secrets[name].items():
            with open(os.path.join(d, key), "w") as f:
                f.write(value + "\n")
        text = text.replace(m["mountPath"].rstrip("/") + "/", d + "/")
    config = os.path.join(WORK, f"herald_{label.replace('/', '_')}.yaml")
    with open(config, "w") as f:
        f.write(text)
    env = {k: v for k, v in os.environ.items() if not k.startswith("HERALD")}
    env.update(image_env())
    for e in c.get("env", []):
        if e["name"].startswith("HERALD__"):
            env[e["name"]] = e.get("value", PLACEHOLDERS.get(e["name"], "placeholder-from-a-secret"))
    env.update(extra_env or {})
    p = subprocess.run([os.environ["HERALD_BIN"], "check-config", config], env=env, capture_output=True, text=True)
    return {k for k in env if k.startswith("HERALD__")}, p


def check_config(docs, label):
    names, p = run_check_config(docs, label)
    out = (p.stdout + p.stderr).strip()
    if p.returncode != 0 or "warning" in out:
        fail(f"{label}: herald check-config on the ConfigMap's herald.yaml with the Deployment's env:\n{out}")
    return names, out


def check_every_env_name(verified):
    files = [os.path.join(ROOT, "Dockerfile")] + glob.glob(os.path.join(ROOT, "deploy/**/*"), recursive=True)
    named = set()
    for path in files:
        if os.path.isfile(path):
            named |= set(re.findall(r"\bHERALD__[A-Z0-9_]*[A-Z0-9]\b", open(path, errors="replace").read()))
    empty = os.path.join(WORK, "empty.yaml")
    open(empty, "w").close()
    for name in sorted(named - verified):
        env = {k: v for k, v in os.environ.items() if not k.startswith("HERALD")}
        env[name] = "1"
        p = subprocess.run([os.environ["HERALD_BIN"], "check-config", empty], env=env, capture_output=True, text=True)
        if "unknown field" in p.stdout + p.stderr or "unknown variant" in p.stdout + p.stderr:
            fail(f"{name} (written in deploy/ or the Dockerfile) is not a configuration key: {(p.stdout + p.stderr).strip()}")
    return named


# 4b. The Argo CD kit adds Herald's keys to the operator's argocd-notifications-cm and removes only those.
OPERATOR_DATA = {  # what an operator may already have: another service, template, trigger, the context
    "service.slack": "token: $slack-token\n",
    "template.app-sync-failed": "message: Sync of {{.app.metadata.name}} failed\n",
    "trigger.on-sync-failed": "- when: app.status.operationState.phase in ['Error', 'Failed']\n  send: [app-sync-failed]\n",
    "context": "argocdUrl: https://argocd.example.com\n",
}
OPERATOR_SUBSCRIPTION = "- recipients: [slack:deployments]\n  triggers: [on-sync-failed]\n"


def render(directory):
    p = subprocess.run(os.environ["RENDER_CMD"].split() + [directory], capture_output=True, text=True)
    if p.returncode != 0:
        fail(f"cannot render {os.path.relpath(directory, ROOT)}: {p.stderr.strip()}")
        return []
    return [d for d in yaml.safe_load_all(p.stdout) if d]


def stand_in(directory, files):
    os.makedirs(directory, exist_ok=True)
    for name, content in files.items():
        with open(os.path.join(directory, name), "w") as f:
            f.write(content if isinstance(content, str) else yaml.safe_dump(content))
    return directory


def render_raw(directory):
    return subprocess.run(os.environ["RENDER_CMD"].split() + [directory], capture_output=True, text=True)


def check_argocd_component(patch):
    """The Component owns nothing, merges Herald's keys into the ConfigMap of the kustomization including it, and
    refuses to build rather than replace the operator's own `subscriptions`."""
    component = os.path.join(ROOT, "deploy/argocd")
    alone = render(component)
    if alone:
        fail(f"argocd: deploy/argocd renders {len(alone)} object(s) on its own; `kubectl delete -k` would delete them")
    checked = 0

    def operator(case, data, extra=None):
        # As in Argo CD's upstream install.yaml, the ConfigMap has no namespace until the operator's kustomization sets it.
        cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "argocd-notifications-cm"}}
        if data is not None:
            cm["data"] = data
        d = os.path.join(WORK, "argocd-operator-" + case)
        return stand_in(d, {
            "cm.yaml": cm,
            "kustomization.yaml": {"namespace": "argocd", "resources": ["cm.yaml"],
                                   "components": [os.path.relpath(component, d)], **(extra or {})},
        })

    # Their keys, and a ConfigMap without data (upstream install.yaml): Herald's keys are added, theirs kept.
    for case, data in (("own-keys", OPERATOR_DATA), ("no-data", None)):
        docs = render(operator(case, data))
        got = (one(docs, "ConfigMap", "argocd-notifications-cm") or {}).get("data")
        if got != {**(data or {}), **patch["data"]}:
            fail(f"argocd: the Component inside an operator's kustomization ({case}) renders data keys "
                 f"{sorted(got or {})}, expected the operator's {sorted(data or {})} plus Herald's")
        checked += validate_schema(docs, f"argocd component ({case})")[0]
    # Their own subscriptions in the ConfigMap: the build stops, naming the key, instead of replacing them.
    p = render_raw(operator("own-subscriptions", {**OPERATOR_DATA, "subscriptions": OPERATOR_SUBSCRIPTION}))
    if p.returncode == 0 or "/data/subscriptions" not in p.stderr:
        fail("argocd: the Component must refuse an operator's ConfigMap that has `subscriptions` (kustomize exit "
             f"{p.returncode}): {p.stderr.strip() or 'it rendered'}")
    # The way README.md gives instead: the merged list in the operator's own patch, which kustomize applies last.
    merged = OPERATOR_SUBSCRIPTION + patch["data"]["subscriptions"]
    own_patch = {"patch": yaml.safe_dump({"apiVersion": "v1", "kind": "ConfigMap",
                                          "metadata": {"name": "argocd-notifications-cm"},
                                          "data": {"subscriptions": merged}})}
    docs = render(operator("merged-subscriptions", OPERATOR_DATA, {"patches": [own_patch]}))
    got = (one(docs, "ConfigMap", "argocd-notifications-cm") or {}).get("data") or {}
    if got.get("subscriptions") != merged or any(got.get(k) != v for k, v in OPERATOR_DATA.items()):
        fail("argocd: with the merged subscriptions in the operator's own patch, the Component should render them as "
             f"written: {got.get('subscriptions')!r}")
    return checked + validate_schema(docs, "argocd component (merged subscriptions)")[0]


FAKE_KUBECTL = """#!/usr/bin/env bash
# Stands in for the API server: `-n NS get|patch KIND NAME ARGS` act on $FAKE_DIR/KIND.yaml with `kubectl patch --local`.
set -euo pipefail
[ "$1" = "-n" ] && shift 2
verb="$1" kind="$2"; shift 3
file="$FAKE_DIR/$kind.yaml"
[ -f "$file" ] || { echo "Error from server (NotFound): $kind not found" >&2; exit 1; }
case "$verb" in
  get) [ $# -eq 0 ] || kubectl patch --local -f "$file" --type merge -p '{}' "$@" ;;
  patch) kubectl patch --local -f "$file" "$@" -o yaml >"$file.new" && mv "$file.new" "$file" ;;
  *) echo "fake kubectl: $verb is not implemented" >&2; exit 1 ;;
esac
"""


def check_argocd_install_uninstall(patch):
    """README's merge-patch install, then uninstall.sh: the operator's keys come out exactly as they went in."""
    patch_file = os.path.join(ROOT, ARGOCD_PATCH)
    script = os.path.join(ROOT, "deploy/argocd/uninstall.sh")
    fake = stand_in(os.path.join(WORK, "argocd-cluster"), {"kubectl": FAKE_KUBECTL})
    os.chmod(os.path.join(fake, "kubectl"), 0o755)
    env = {**os.environ, "FAKE_DIR": fake, "KUBECTL": os.path.join(fake, "kubectl")}
    meta = {"name": "argocd-notifications-cm", "namespace": "argocd"}
    secret_data = {"slack-token": "eG94Yi0=", "herald-token": "dG9rZW4="}
    results = []
    for case, subscriptions in (("own keys only", None), ("own subscriptions merged with Herald's", OPERATOR_SUBSCRIPTION)):
        stand_in(fake, {"configmap.yaml": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": OPERATOR_DATA},
                        "secret.yaml": {"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "data": secret_data,
                                        "metadata": {**meta, "name": "argocd-notifications-secret"}}})
        cm_file = os.path.join(fake, "configmap.yaml")
        p = subprocess.run(["kubectl", "patch", "--local", "-f", cm_file, "--type", "merge", "--patch-file", patch_file,
                            "-o", "yaml"], capture_output=True, text=True)
        if p.returncode != 0:
            fail(f"argocd: the README's merge patch does not apply: {p.stderr.strip()}")
            return results
        installed = yaml.safe_load(p.stdout)
        if installed["data"] != {**OPERATOR_DATA, **patch["data"]}:
            fail(f"argocd ({case}): the merge patch changed keys that are not Herald's")
        if subscriptions:  # merged the README's way: the operator's entries, then Herald's
            installed["data"]["subscriptions"] = subscriptions + patch["data"]["subscriptions"]
        stand_in(fake, {"configmap.yaml": installed})
        runs = [subprocess.run(["bash", script], env=env, capture_output=True, text=True) for _ in range(2)]
        for r in runs:
            if r.returncode != 0:
                fail(f"argocd ({case}): uninstall.sh failed:\n{r.stdout}{r.stderr}")
        left = load(cm_file)[0]["data"]
        expected = {**OPERATOR_DATA, **({"subscriptions": installed["data"]["subscriptions"]} if subscriptions else {})}
        if left != expected:
            fail(f"argocd ({case}): after uninstall.sh the ConfigMap has {sorted(left)}, expected {sorted(expected)}")
        if subscriptions and "subscriptions" not in runs[0].stderr:
            fail(f"argocd ({case}): uninstall.sh kept the merged subscriptions without saying so")
        if load(os.path.join(fake, "secret.yaml"))[0]["data"] != {"slack-token": secret_data["slack-token"]}:
            fail(f"argocd ({case}): uninstall.sh should remove herald-token from the Secret, and only that")
        if "no Herald keys" not in runs[1].stdout:
            fail(f"argocd ({case}): a second uninstall.sh should find nothing to remove:\n{runs[1].stdout}")
        results.append(case)
    return results


# 4c. The knobs deploy/kubernetes/README.md documents, applied as written to overlays/single.
KNOBS = {"networkpolicy-namespaces", "config-from-secret", "service-loadbalancer"}


def check_knobs():
    text = open(os.path.join(ROOT, "deploy/kubernetes/README.md")).read()
    knobs = dict(re.findall(r"<!-- validate-deploy: knob ([a-z-]+) -->\s*```yaml\n(.*?)```", text, re.S))
    if set(knobs) != KNOBS:
        fail(f"kubernetes README: knobs {sorted(knobs)}, expected {sorted(KNOBS)}")
    d = os.path.join(WORK, "knobs")
    base = os.path.relpath(os.path.join(ROOT, "deploy/kubernetes/overlays/single"), d)
    stand_in(d, {"kustomization.yaml": f"resources:\n  - {base}\npatches:\n" + "".join(knobs.values())})
    docs = render(d)
    if not docs:
        return []
    validate_schema(docs, "knobs")
    check_wiring(docs, "knobs-single")
    netpol = one(docs, "NetworkPolicy", "herald")
    rules = netpol["spec"]["ingress"]
    namespaces = [r["from"][0]["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"] for r in rules
                  if "namespaceSelector" in r["from"][0]]
    if namespaces != ["argocd", "prometheus"]:
        fail(f"knob networkpolicy-namespaces: ingress from {namespaces}, expected ['argocd', 'prometheus']")
    blocks = [r["from"][0]["ipBlock"]["cidr"] for r in rules if "ipBlock" in r["from"][0]]
    svc = one(docs, "Service", "herald")
    if svc["spec"].get("type") != "LoadBalancer" or svc["spec"].get("externalTrafficPolicy") != "Local" or not blocks:
        fail(f"knob service-loadbalancer: Service type {svc['spec'].get('type')}, externalTrafficPolicy "
             f"{svc['spec'].get('externalTrafficPolicy')}, NetworkPolicy ipBlocks {blocks}")
    config = next(v for v in one(docs, "Deployment", "herald")["spec"]["template"]["spec"]["volumes"] if v["name"] == "config")
    if config.get("secret", {}).get("secretName") != "herald-config-secret" or "configMap" in config:
        fail(f"knob config-from-secret: the config volume is {config}")
    return sorted(knobs)


# 4c'. The common values deploy/kubernetes/README.md sets as kustomize patches: each one an example under
# deploy/kubernetes/examples/<name>/, shown in the README as that very file, built, schema-valid, wired like the
# overlay it is over, and having its effect.
EXAMPLES = {"image", "replicas", "storage-sqlite", "storage-postgres", "secrets", "ingress", "servicemonitor"}


def check_examples():
    text = open(os.path.join(ROOT, "deploy/kubernetes/README.md")).read()
    shown = dict(re.findall(r"<!-- validate-deploy: example ([a-z-]+) -->\s*```yaml\n(.*?)```", text, re.S))
    root = os.path.join(ROOT, "deploy/kubernetes/examples")
    present = {d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d))}
    if present != EXAMPLES or set(shown) != EXAMPLES:
        fail(f"examples: directories {sorted(present)}, shown in the README {sorted(shown)}, expected {sorted(EXAMPLES)}")
    out = {}
    for name in sorted(present):
        directory = os.path.join(root, name)
        own = open(os.path.join(directory, "kustomization.yaml")).read()
        if shown.get(name) != own:
            fail(f"examples/{name}: the README's block is not the text of examples/{name}/kustomization.yaml")
        for extra in sorted(set(os.listdir(directory)) - {"kustomization.yaml"}):
            if f"`{extra}`" not in text:
                fail(f"examples/{name}: the README does not name its file `{extra}`")
        docs = render(directory)
        if not docs:
            continue
        validate_schema(docs, f"examples/{name}")
        over = yaml.safe_load(own)["resources"][0].split("/")[-1]
        check_wiring(docs, f"examples/{name}-{over}")
        out[name] = docs
    effects = {
        "image": lambda d: container(one(d, "Deployment", "herald"))["image"] == "registry.example.com/platform/herald:0.2.0",
        "replicas": lambda d: one(d, "Deployment", "herald")["spec"]["replicas"] == 3,
        "storage-sqlite": lambda d: one(d, "PersistentVolumeClaim", "herald-data")["spec"]["resources"]["requests"]["storage"] == "5Gi"
        and one(d, "PersistentVolumeClaim", "herald-data")["spec"].get("storageClassName") == "fast-ssd",
        "storage-postgres": lambda d: next(e for e in container(one(d, "Deployment", "herald"))["env"]
                                           if e["name"] == "HERALD__STORAGE__URL")["valueFrom"]["secretKeyRef"]
        == {"name": "herald-db-app", "key": "uri"},
        "secrets": lambda d: next(v for v in one(d, "Deployment", "herald")["spec"]["template"]["spec"]["volumes"]
                                  if v["name"] == "secrets")["secret"]
        == {"secretName": "platform-herald-secrets", "optional": True, "defaultMode": 0o440},
        "ingress": lambda d: "ingress-nginx" in [r["from"][0].get("namespaceSelector", {}).get("matchLabels", {}).get(
            "kubernetes.io/metadata.name") for r in one(d, "NetworkPolicy", "herald")["spec"]["ingress"]],
        "servicemonitor": lambda d: sorted(x["kind"] for x in d if x["metadata"].get("labels", {}).get("release") == "prometheus")
        == ["PrometheusRule", "ServiceMonitor"] and one(d, "ServiceMonitor", "herald")["spec"]["endpoints"][0]["interval"] == "15s",
    }
    before = len(problems)
    for name, effect in effects.items():
        try:
            ok = name in out and effect(out[name])
        except (KeyError, TypeError, StopIteration):
            ok = False
        if not ok:
            fail(f"examples/{name}: rendered, but without the effect the README says")
    if len(problems) == before:
        print(f"  deploy/kubernetes/examples: {', '.join(sorted(out))} render, schema-valid, wired, as shown in the README, "
              "each with its effect")
    return out


argocd_patch = load(os.path.join(ROOT, ARGOCD_PATCH))[0]
argocd_docs = [argocd_patch]
validate_schema(argocd_docs, "argocd patch")
n = check_argocd_component(argocd_patch)
print(f"  deploy/argocd: the patch is a schema-valid ConfigMap; as a Component it renders nothing alone, merges into "
      f"an operator's ConfigMap and refuses one with its own subscriptions ({n} object(s) schema-valid)")
cases = check_argocd_install_uninstall(argocd_patch)
print(f"  deploy/argocd: merge-patch install + uninstall.sh leave the operator's keys as they were: {'; '.join(cases)}")

namespace_doc = load(os.path.join(ROOT, "deploy/kubernetes/namespace.yaml"))[0]
validate_schema([namespace_doc], "namespace.yaml")

verified = set()
for target in ("deploy/kubernetes/base", "deploy/kubernetes/overlays/single", "deploy/kubernetes/overlays/ha"):
    label = target.split("/")[-1]
    docs = rendered(target)
    n, crds = validate_schema(docs, label)
    kinds = ", ".join(sorted(d["kind"] for d in docs))
    print(f"  {target}: {n} built-in object(s) schema-valid [{kinds}]")
    svc = check_wiring(docs, label) if label != "base" else None
    if label == "base" and container(one(docs, "Deployment", "herald"))["image"] != "herald":
        fail("base: the image must be named `herald`, so that an overlay's `images:` entry matches it")
    if {d["metadata"].get("namespace") for d in docs} != {namespace_doc["metadata"]["name"]}:
        fail(f"{label}: objects outside the namespace of deploy/kubernetes/namespace.yaml")
    if crds:
        check_monitoring(docs, label)
        print(f"  {target}: ServiceMonitor and PrometheusRule checked (promtool check + test rules, metric names)")
    if label != "base":
        check_argocd_url(svc, argocd_docs)
        names, out = check_config(docs, label)
        verified |= names
        print(f"  {target}: herald check-config with {', '.join(sorted(names))}: {out.splitlines()[-1] if out else ''}")

knobs = check_knobs()
print(f"  deploy/kubernetes/README.md knobs applied to overlays/single, schema-valid and effective: {', '.join(knobs)}")

examples = sorted(glob.glob(os.path.join(ROOT, "deploy/**/*.example.yaml"), recursive=True))
for path in examples:
    validate_schema(load(path), os.path.relpath(path, ROOT))
print(f"  {len(examples)} example file(s) schema-valid: " + ", ".join(os.path.relpath(p, ROOT) for p in examples))


# 4d. The Ingress example reaches the Service the overlays render.
def check_ingress(docs):
    ingress = one(docs, "Ingress", "herald")
    svc = one(docs, "Service", "herald")
    if not ingress or not svc:
        fail("examples/ingress: expected one Ingress herald and the Service herald")
        return
    if ingress["metadata"].get("namespace") != svc["metadata"]["namespace"]:
        fail(f"examples/ingress: namespace {ingress['metadata'].get('namespace')}, the Service is in "
             f"{svc['metadata']['namespace']}")
    ports = {p.get("name") for p in svc["spec"]["ports"]} | {p["port"] for p in svc["spec"]["ports"]}
    tls_hosts = {h for t in ingress["spec"].get("tls", []) for h in t.get("hosts", [])}
    for rule in ingress["spec"]["rules"]:
        if rule.get("host") not in tls_hosts:
            fail(f"examples/ingress: host {rule.get('host')} without TLS: Basic credentials would cross in clear")
        for path in rule["http"]["paths"]:
            backend = path["backend"]["service"]
            port = backend["port"].get("name", backend["port"].get("number"))
            if backend["name"] != svc["metadata"]["name"] or port not in ports:
                fail(f"examples/ingress: backend {backend} is not the Service herald's port {sorted(map(str, ports))}")


# 4e. The Argo CD Application that installs Herald from this repository. Argo CD's CRD is not among the Kubernetes
# schemas: the fields are checked against the Application spec (v1alpha1) strictly, for the fields this example may
# use, and the source it names is rendered with the images it sets.
APPLICATION_FIELDS = {
    "": {"apiVersion", "kind", "metadata", "spec"},
    "metadata": {"name", "namespace", "labels", "annotations", "finalizers"},
    "spec": {"project", "source", "destination", "syncPolicy", "revisionHistoryLimit", "ignoreDifferences"},
    "spec.source": {"repoURL", "targetRevision", "path", "kustomize"},
    "spec.source.kustomize": {"images", "namePrefix", "nameSuffix", "commonLabels", "patches", "components"},
    "spec.destination": {"server", "name", "namespace"},
    "spec.syncPolicy": {"automated", "syncOptions", "managedNamespaceMetadata", "retry"},
    "spec.syncPolicy.automated": {"prune", "selfHeal", "allowEmpty"},
    "spec.syncPolicy.managedNamespaceMetadata": {"labels", "annotations"},
}
SYNC_OPTIONS = {"CreateNamespace=true", "PruneLast=true", "ApplyOutOfSyncOnly=true", "ServerSideApply=true",
                "RespectIgnoreDifferences=true", "FailOnSharedResource=true", "Validate=false"}


def check_application():
    path = os.path.join(ROOT, "deploy/kubernetes/argocd-application.yaml")
    app = load(path)[0]
    label = "argocd-application.yaml"

    def walk(node, at):
        allowed = APPLICATION_FIELDS.get(at)
        if allowed is None or not isinstance(node, dict):
            return
        for k, v in node.items():
            where = f"{at}.{k}" if at else k
            if k not in allowed:
                fail(f"{label}: unknown field {where}")
            walk(v, where)

    walk(app, "")
    if (app.get("apiVersion"), app.get("kind")) != ("argoproj.io/v1alpha1", "Application"):
        fail(f"{label}: not an argoproj.io/v1alpha1 Application")
    spec, src = app["spec"], app["spec"]["source"]
    argocd_ns = yaml.safe_load(open(os.path.join(ROOT, ARGOCD_PATCH)))["metadata"]["namespace"]
    if app["metadata"].get("namespace") != argocd_ns:
        fail(f"{label}: metadata.namespace {app['metadata'].get('namespace')}, Argo CD runs in {argocd_ns}")
    if not re.match(r"^https://[^/\s]+/\S+$", src.get("repoURL", "")) or not src.get("targetRevision"):
        fail(f"{label}: source needs an https repoURL and a targetRevision")
    overlay = os.path.join(ROOT, src.get("path", "-"))
    if os.path.relpath(overlay, ROOT) not in ("deploy/kubernetes/overlays/single", "deploy/kubernetes/overlays/ha"):
        fail(f"{label}: source.path {src.get('path')} is not one of this repository's overlays")
        return None
    namespace = yaml.safe_load(open(os.path.join(ROOT, "deploy/kubernetes/namespace.yaml")))["metadata"]
    if spec["destination"].get("namespace") != namespace["name"]:
        fail(f"{label}: destination namespace {spec['destination'].get('namespace')}, the kit's is {namespace['name']}")
    sync = spec.get("syncPolicy", {})
    for option in sync.get("syncOptions", []):
        if option not in SYNC_OPTIONS:
            fail(f"{label}: sync option {option!r} is not one Argo CD knows")
    if "CreateNamespace=true" in sync.get("syncOptions", []) and \
            sync.get("managedNamespaceMetadata", {}).get("labels") != namespace.get("labels"):
        fail(f"{label}: the namespace Argo CD creates must carry namespace.yaml's labels {namespace.get('labels')}")
    if "resources-finalizer.argocd.argoproj.io" in app["metadata"].get("finalizers", []):
        fail(f"{label}: deleting the Application would delete the volume with the database; the example leaves "
             "the finalizer to the operator")
    # The source as Argo CD builds it: `kustomize edit set image` in the overlay, on a copy of deploy/kubernetes.
    images = []
    for entry in src.get("kustomize", {}).get("images", []):
        m = re.match(r"^([^=]+)=([^:@]+)(?::([^@]+))?$", entry)
        if not m:
            fail(f"{label}: kustomize image {entry!r} is not NAME=REGISTRY/IMAGE:TAG")
            continue
        images.append({"name": m.group(1), "newName": m.group(2), **({"newTag": m.group(3)} if m.group(3) else {})})
    tree = os.path.join(WORK, "application")
    shutil.copytree(os.path.join(ROOT, "deploy/kubernetes"), os.path.join(tree, "deploy/kubernetes"))
    d = os.path.join(tree, os.path.relpath(overlay, ROOT))
    kustomization = load(os.path.join(d, "kustomization.yaml"))[0]
    names = {i["name"] for i in images}
    kustomization["images"] = [i for i in kustomization.get("images", []) if i["name"] not in names] + images
    stand_in(d, {"kustomization.yaml": kustomization})
    docs = render(d)
    if not docs:
        return None
    validate_schema(docs, label)
    check_wiring(docs, "application-" + os.path.basename(overlay))
    image = container(one(docs, "Deployment", "herald"))["image"]
    wanted = [f"{i['newName']}:{i.get('newTag', 'latest')}" for i in images if i["name"] == "herald"]
    if image not in wanted:
        fail(f"{label}: renders image {image}, the Application sets {wanted}")
    return f"{src['path']} at {src['targetRevision']}, image {image}"


# 4f. components/instances on each overlay: per-instance ingest tokens from their own Secret keys, bound in the file.
INSTANCES = "deploy/kubernetes/components/instances"


def check_instances_component():
    done = []
    secrets = example_secret_keys()
    for overlay in ("single", "ha"):
        label = f"instances-{overlay}"
        d = os.path.join(WORK, label)
        stand_in(d, {"kustomization.yaml": {
            "resources": [os.path.relpath(os.path.join(ROOT, "deploy/kubernetes/overlays", overlay), d)],
            "components": [os.path.relpath(os.path.join(ROOT, INSTANCES), d)]}})
        docs = render(d)
        if not docs:
            continue
        validate_schema(docs, label)
        check_wiring(docs, label)
        c = container(one(docs, "Deployment", "herald"))
        if any(e["name"] == "HERALD__SERVER__AUTH__INGEST_TOKENS" for e in c.get("env", [])):
            fail(f"{label}: the Deployment still sets HERALD__SERVER__AUTH__INGEST_TOKENS, which would replace the "
                 "file's bound tokens")
        volumes = {v["name"]: v for v in one(docs, "Deployment", "herald")["spec"]["template"]["spec"]["volumes"]}
        mounts = {volumes[m["name"]]["secret"]["secretName"]: m["mountPath"].rstrip("/")
                  for m in c.get("volumeMounts", []) if "secret" in volumes.get(m["name"], {})}
        cfg = yaml.safe_load(one(docs, "ConfigMap", "herald-config")["data"]["herald.yaml"])
        instances = {i["name"] for i in cfg.get("argocd", {}).get("instances", [])}
        tokens = cfg.get("server", {}).get("auth", {}).get("ingest_tokens", [])
        bound = set()
        for t in tokens:
            if not isinstance(t, dict) or t.get("instance") not in instances:
                fail(f"{label}: ingest token {t!r} is not bound to one of the instances {sorted(instances)}")
                continue
            bound.add(t["instance"])
            path = t.get("token_file", "")
            secret, key = next(((n, path[len(m) + 1:]) for n, m in mounts.items() if path.startswith(m + "/")),
                               (None, None))
            if not secret or key not in secrets.get(secret, set()):
                fail(f"{label}: token {t.get('name')}: token_file {path} is no key of a mounted Secret an example "
                     f"defines ({mounts})")
        if len(instances) < 2 or bound != instances:
            fail(f"{label}: every instance needs its own bound token: instances {sorted(instances)}, bound {sorted(bound)}")
        names, out = check_config(docs, label)
        # The trap the component removes: the kit's list variable over a file with bindings is refused.
        _, p = run_check_config(docs, label + "-list-env", {"HERALD__SERVER__AUTH__INGEST_TOKENS": "placeholder-from-a-secret"})
        said = p.stdout + p.stderr
        if p.returncode != 2 or "bind tokens to Argo CD instances" not in said:
            fail(f"{label}: check-config must refuse HERALD__SERVER__AUTH__INGEST_TOKENS over bound tokens "
                 f"(exit {p.returncode}):\n{said}")
        done.append(f"{overlay} ({out.splitlines()[-1] if out else ''})")
    return done


print(f"  {INSTANCES}: per-instance tokens from Secret keys, bound in the file, no list variable; check-config OK "
      f"and refusing the list variable, on: {'; '.join(check_instances_component())}")

example_docs = check_examples()
check_ingress(example_docs.get("ingress", []))
print("  deploy/kubernetes/examples/ingress: TLS for every host, backend the Service herald's port")
print(f"  deploy/kubernetes/argocd-application.yaml: fields of an Application, renders {check_application()}")

# 5. The Grafana dashboard: every panel's query is PromQL promtool accepts, naming only metrics Herald exports.
def check_dashboard():
    path = os.path.join(ROOT, "deploy/grafana/herald.json")
    dash = json.load(open(path))
    exprs = [(p["title"], t["expr"]) for p in dash["panels"] for t in p.get("targets", [])]
    if not exprs:
        fail("grafana: the dashboard has no queries")
    rules = {"groups": [{"name": "dashboard", "rules": [
        {"record": f"herald:dashboard_panel_{i}", "expr": e} for i, (_, e) in enumerate(exprs)]}]}
    for title, e in exprs:
        for m in metric_names(e) - metrics_in_source:
            fail(f"grafana: panel {title!r} uses {m}, which Herald does not export")
    f = os.path.join(WORK, "dashboard_rules.yaml")
    with open(f, "w") as out:
        yaml.safe_dump(rules, out)
    p = subprocess.run([os.environ["PROMTOOL"], "check", "rules", f], capture_output=True, text=True)
    if p.returncode != 0:
        fail(f"grafana: promtool check rules on the panels' queries:\n{p.stdout}{p.stderr}")
    return len(exprs)


print(f"  deploy/grafana/herald.json: {check_dashboard()} panel queries accepted by promtool, metric names exported")

named = check_every_env_name(verified)
print(f"  {len(named)} HERALD__* name(s) in deploy/ and the Dockerfile are configuration keys: {', '.join(sorted(named))}")

if problems:
    print(f"validate-deploy: {len(problems)} problem(s)", file=sys.stderr)
    sys.exit(1)
PY
say "OK"
