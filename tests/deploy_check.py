"""Offline checks of the recorder's Kubernetes deployment, for tests/it/deploy.rs.

Run with the Python of the tests' virtual environment (tests/support/k8s.rs
makes it: kubernetes-validate, helm-python-sdk, the Prometheus Operator's
models from cloudcoil):

  deploy_check.py validate [--json OUT] FILE...
      Every object of every YAML file is checked against the Kubernetes
      schemas of each version in KUBERNETES_VERSIONS, strictly (a field the
      schema does not have is an error). A ServiceMonitor is checked against
      the Prometheus Operator's monitoring.coreos.com/v1 model, and a field
      the model would drop (as the API server prunes a field a CRD's schema
      lacks) is an error too. Any other kind is an error: nothing is skipped.
      --json writes the objects read, as a JSON list.

  deploy_check.py render --chart DIR --release NAME --namespace NS
                         [--values FILE]... --out FILE
      Lints the chart and renders it with Helm's own engine (Helm v4's Go
      library, through helm-python-sdk's libhelm_c) as `helm template` would,
      each values file merged over the chart's defaults in order; writes the
      rendered objects, templates sorted by name, into one YAML file.

Each failure is one line on stderr naming the file, the object and the
field; the exit status is 1.
"""

import argparse
import copy
import json
import sys

import yaml

# The oldest Kubernetes release still supported upstream when this was
# written and the newest the schemas know.
KUBERNETES_VERSIONS = ["1.32.0", "1.37.0"]


def fail(message):
    print(f"error: {message}", file=sys.stderr)
    return 1


def documents(path):
    with open(path, encoding="utf-8") as f:
        return [d for d in yaml.safe_load_all(f) if d]


def name_of(obj):
    return f"{obj.get('kind')}/{obj.get('metadata', {}).get('name')}"


def dropped(given, kept, where=""):
    """The paths of `given` that `kept` lost: fields the model ignored."""
    if isinstance(given, dict):
        out = []
        for key, value in given.items():
            if not isinstance(kept, dict) or key not in kept:
                out.append(f"{where}.{key}".lstrip("."))
            else:
                out.extend(dropped(value, kept[key], f"{where}.{key}"))
        return out
    if isinstance(given, list) and isinstance(kept, list):
        out = []
        for i, (g, k) in enumerate(zip(given, kept)):
            out.extend(dropped(g, k, f"{where}[{i}]"))
        return out
    return []


def check_service_monitor(obj):
    """Errors of a ServiceMonitor against the operator's CRD model."""
    from cloudcoil.models.prometheus_operator.v1 import ServiceMonitor

    if obj.get("apiVersion") != "monitoring.coreos.com/v1":
        return [f"apiVersion {obj.get('apiVersion')!r}, not monitoring.coreos.com/v1"]
    try:
        model = ServiceMonitor.model_validate(copy.deepcopy(obj))
    except Exception as e:  # pydantic's ValidationError names the fields
        return [" ".join(str(e).split())]
    kept = model.model_dump(by_alias=True, exclude_none=True, mode="json")
    return [f"{path}: not a field of ServiceMonitor (the CRD would drop it)" for path in dropped(obj, kept)]


def check_core(obj):
    """Errors of a core Kubernetes object against each version's schema."""
    import kubernetes_validate

    errors = []
    for version in KUBERNETES_VERSIONS:
        try:
            kubernetes_validate.validate(obj, version, strict=True)
        except kubernetes_validate.ValidationError as e:
            path = ".".join(str(p) for p in e.path)
            errors.append(f"Kubernetes {version}: {path}: {e.message}")
        except kubernetes_validate.SchemaNotFoundError as e:
            errors.append(f"Kubernetes {version}: {e.message}")
    return errors


def validate(args):
    rc = 0
    objects = []
    for path in args.files:
        try:
            docs = documents(path)
        except (OSError, yaml.YAMLError) as e:
            rc |= fail(f"{path}: cannot read it as YAML: {' '.join(str(e).split())}")
            continue
        if not docs:
            rc |= fail(f"{path}: no object")
        for obj in docs:
            if not isinstance(obj, dict) or "kind" not in obj or "apiVersion" not in obj:
                rc |= fail(f"{path}: a document without kind and apiVersion")
                continue
            if obj["kind"] == "ServiceMonitor":
                errors = check_service_monitor(obj)
            else:
                errors = check_core(obj)
            for e in errors:
                rc |= fail(f"{path}: {name_of(obj)}: {e}")
            if not errors:
                print(f"ok {path}: {name_of(obj)}")
            objects.append(obj)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(objects, f, indent=1, sort_keys=True)
    return rc


def merge(base, over):
    """Helm's merge of a values file over the values before it."""
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out


def render(args):
    import helm_python as helm

    lint = helm.lint(args.chart)
    if lint.get("errors"):
        return fail(f"{args.chart}: helm lint: {lint['errors']}")
    # severity 1 is INFO (Helm's support.InfoSev); anything above fails.
    worse = [m for m in lint.get("messages", []) if m.get("severity", 0) > 1]
    if worse:
        return fail(f"{args.chart}: helm lint: {worse}")
    values = {}
    for path in args.values:
        values = merge(values, documents(path)[0] if documents(path) else {})
    with helm.Chart.load(args.chart) as chart:
        rendered = chart.render(values, name=args.release, namespace=args.namespace)
    parts = []
    for template in sorted(rendered):
        text = rendered[template]
        if template.endswith(".yaml") and text.strip():
            parts.append(f"# Source: {template}\n{text.strip()}\n")
    with open(args.out, "w", encoding="utf-8") as f:
        f.write("---\n".join(parts))
    print(f"rendered {len(parts)} templates of {args.chart} into {args.out} (Helm {helm.helm_sdk_version()})")
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    v = sub.add_parser("validate")
    v.add_argument("--json")
    v.add_argument("files", nargs="+")
    r = sub.add_parser("render")
    r.add_argument("--chart", required=True)
    r.add_argument("--release", required=True)
    r.add_argument("--namespace", required=True)
    r.add_argument("--values", action="append", default=[])
    r.add_argument("--out", required=True)
    args = parser.parse_args()
    return validate(args) if args.command == "validate" else render(args)


if __name__ == "__main__":
    sys.exit(main())
