#!/usr/bin/env python3
"""`sidecarctl kube --kind sandbox-template|warm-pool` output against the agent-sandbox CRDs' own schemas.

    images/agent-sandbox-check.py CRD.yaml [CRD.yaml ...] -- FILE.yaml [FILE.yaml ...]

The CRDs are kubernetes-sigs/agent-sandbox's `k8s/crds/extensions.agents.x-k8s.io_sandboxtemplates.yaml` and
`..._sandboxwarmpools.yaml` (from a checkout of that project, or `kubectl get crd NAME -o yaml` on a cluster that
has them). This repository keeps no copy of them, so CI validates the templates' pods against the Kubernetes API
schemas instead (sidecarctl/tests/kube_schemas.rs) and this check runs where the CRDs are at hand.

Each document is checked against the openAPIV3Schema of its apiVersion and kind, strictly: an object schema with
properties admits no other field (what `kubectl apply --validate=strict` refuses; a structural schema would prune
it silently). Needs PyYAML and jsonschema (pip). Exit 0 when every document is valid, 1 otherwise.
"""
import sys

import jsonschema
import yaml


def closed(schema):
    """The schema with every object that lists its properties closed to others."""
    if isinstance(schema, dict):
        if (
            schema.get("type") == "object"
            and "properties" in schema
            and "additionalProperties" not in schema
            and not schema.get("x-kubernetes-preserve-unknown-fields")
        ):
            schema["additionalProperties"] = False
        for value in schema.values():
            closed(value)
    elif isinstance(schema, list):
        for value in schema:
            closed(value)
    return schema


def main(argv):
    if "--" not in argv:
        sys.exit(__doc__)
    split = argv.index("--")
    schemas = {}
    for path in argv[:split]:
        with open(path) as file:
            crd = yaml.safe_load(file)
        for version in crd["spec"]["versions"]:
            key = (f"{crd['spec']['group']}/{version['name']}", crd["spec"]["names"]["kind"])
            schemas[key] = closed(version["schema"]["openAPIV3Schema"])
    failed = 0
    for path in argv[split + 1 :]:
        with open(path) as file:
            documents = list(yaml.safe_load_all(file))
        for doc in documents:
            key = (doc.get("apiVersion"), doc.get("kind"))
            if key not in schemas:
                print(f"{path}: no CRD given for {key[1]} {key[0]}")
                failed += 1
                continue
            errors = list(jsonschema.Draft7Validator(schemas[key]).iter_errors(doc))
            for error in errors:
                print(f"{path}: {key[1]} at {'.'.join(map(str, error.path))}: {error.message}")
            failed += len(errors)
            print(f"{path}: {key[1]} {'valid' if not errors else 'INVALID'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
