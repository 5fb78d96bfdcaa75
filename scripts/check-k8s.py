#!/usr/bin/env python3
"""Offline check of the Kubernetes manifests in deploy/k8s (no cluster, no download).

Checks every document: the fields its kind requires (apiVersion, kind, metadata.name, the
workload's selector, template and containers), and for every pod template the rules of the
"restricted" Pod Security Standard that a manifest can break (no host namespaces, no hostPath
volumes, non-root, no privilege escalation, every capability dropped, seccomp RuntimeDefault or
Localhost, no privileged container), plus memory requests and limits on every container.

    python3 scripts/check-k8s.py [DIR]          # default deploy/k8s; exit 1 on a finding
    python3 scripts/check-k8s.py --self-test    # shows that each rule can fail

Written from the Pod Security Standards page (kubernetes.io/docs/concepts/security/
pod-security-standards, "Restricted"); it is not the API server's schema validation.
"""

import copy
import pathlib
import sys

import yaml

API_VERSIONS = {
    "Namespace": "v1",
    "Secret": "v1",
    "Service": "v1",
    "ConfigMap": "v1",
    "PersistentVolumeClaim": "v1",
    "Deployment": "apps/v1",
    "StatefulSet": "apps/v1",
}
WORKLOADS = {"Deployment", "StatefulSet"}


def pod_findings(where, spec):
    out = []
    for key in ("hostNetwork", "hostPID", "hostIPC"):
        if spec.get(key):
            out.append(f"{where}: {key} is set")
    for v in spec.get("volumes") or []:
        if "hostPath" in v:
            out.append(f"{where}: volume {v.get('name')} is a hostPath")
    pod_sc = spec.get("securityContext") or {}
    containers = (spec.get("containers") or []) + (spec.get("initContainers") or [])
    if not spec.get("containers"):
        out.append(f"{where}: no containers")
    for c in containers:
        cw = f"{where}, container {c.get('name')}"
        sc = c.get("securityContext") or {}
        if not c.get("image"):
            out.append(f"{cw}: no image")
        if sc.get("privileged"):
            out.append(f"{cw}: privileged")
        if sc.get("allowPrivilegeEscalation") is not False:
            out.append(f"{cw}: allowPrivilegeEscalation is not false")
        if "ALL" not in ((sc.get("capabilities") or {}).get("drop") or []):
            out.append(f"{cw}: capabilities do not drop ALL")
        added = (sc.get("capabilities") or {}).get("add") or []
        if [a for a in added if a != "NET_BIND_SERVICE"]:
            out.append(f"{cw}: adds capabilities {added}")
        non_root = sc.get("runAsNonRoot", pod_sc.get("runAsNonRoot"))
        if non_root is not True:
            out.append(f"{cw}: runAsNonRoot is not true")
        if sc.get("runAsUser", pod_sc.get("runAsUser")) == 0:
            out.append(f"{cw}: runs as user 0")
        seccomp = (sc.get("seccompProfile") or pod_sc.get("seccompProfile") or {}).get("type")
        if seccomp not in ("RuntimeDefault", "Localhost"):
            out.append(f"{cw}: seccompProfile is {seccomp!r}, not RuntimeDefault or Localhost")
        res = c.get("resources") or {}
        for part in ("requests", "limits"):
            if not (res.get(part) or {}).get("memory"):
                out.append(f"{cw}: no memory {part[:-1]}")
    return out


def findings(docs):
    out = []
    for name, doc in docs:
        if not isinstance(doc, dict):
            out.append(f"{name}: not a mapping")
            continue
        kind = doc.get("kind")
        where = f"{name}: {kind} {(doc.get('metadata') or {}).get('name')}"
        if kind not in API_VERSIONS:
            out.append(f"{where}: unknown kind")
            continue
        if doc.get("apiVersion") != API_VERSIONS[kind]:
            out.append(f"{where}: apiVersion {doc.get('apiVersion')!r}, not {API_VERSIONS[kind]}")
        if not (doc.get("metadata") or {}).get("name"):
            out.append(f"{where}: no metadata.name")
        if kind in WORKLOADS:
            spec = doc.get("spec") or {}
            labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
            selector = (spec.get("selector") or {}).get("matchLabels") or {}
            if not selector or any(labels.get(k) != v for k, v in selector.items()):
                out.append(f"{where}: the selector does not match the template's labels")
            out += pod_findings(where, (spec.get("template") or {}).get("spec") or {})
    return out


def load(directory):
    docs = []
    for path in sorted(pathlib.Path(directory).glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc is not None:
                docs.append((path.name, doc))
    return docs


def self_test(docs):
    """Each rule, broken on a copy of the real worker, must be reported."""
    worker = next(d for n, d in docs if d.get("kind") == "Deployment"
                  and d["metadata"]["name"].endswith("worker"))
    breaks = {
        "hostPath": lambda d: d["spec"]["template"]["spec"].setdefault("volumes", []).append(
            {"name": "h", "hostPath": {"path": "/"}}),
        "allowPrivilegeEscalation": lambda d: d["spec"]["template"]["spec"]["containers"][0][
            "securityContext"].update(allowPrivilegeEscalation=True),
        "drop ALL": lambda d: d["spec"]["template"]["spec"]["containers"][0][
            "securityContext"]["capabilities"].update(drop=[]),
        "runAsNonRoot": lambda d: (d["spec"]["template"]["spec"]["securityContext"].pop(
            "runAsNonRoot"), d["spec"]["template"]["spec"]["containers"][0][
            "securityContext"].pop("runAsNonRoot", None)),
        "seccompProfile": lambda d: (d["spec"]["template"]["spec"]["securityContext"].pop(
            "seccompProfile"), d["spec"]["template"]["spec"]["containers"][0][
            "securityContext"].pop("seccompProfile", None)),
        "memory limit": lambda d: d["spec"]["template"]["spec"]["containers"][0][
            "resources"].pop("limits"),
        "hostNetwork": lambda d: d["spec"]["template"]["spec"].update(hostNetwork=True),
        "apiVersion": lambda d: d.update(apiVersion="extensions/v1beta1"),
    }
    assert findings([("worker.yaml", worker)]) == [], findings([("worker.yaml", worker)])
    for rule, brk in breaks.items():
        bad = copy.deepcopy(worker)
        brk(bad)
        found = findings([("worker.yaml", bad)])
        if not found:
            print(f"self-test: breaking {rule} was not reported", file=sys.stderr)
            return 1
        print(f"self-test: {rule}: {found[0]}")
    return 0


def main(argv):
    args = [a for a in argv if a != "--self-test"]
    directory = args[0] if args else str(pathlib.Path(__file__).parent.parent / "deploy" / "k8s")
    docs = load(directory)
    if "--self-test" in argv:
        return self_test(docs)
    found = findings(docs)
    for f in found:
        print(f, file=sys.stderr)
    if found:
        return 1
    print(f"{directory}: {len(docs)} documents, restricted pod security and memory limits: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
