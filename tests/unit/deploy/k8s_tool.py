"""Runs in the deploy tool venv (setup.sh), which has PyYAML and kubernetes-validate; the
project's venv needs neither. Reads rendered manifests and prints one JSON object:

    python k8s_tool.py [--validate 1.29.0,1.30.0,...] FILE...

    {"documents": [{"file": ..., "index": ..., "object": {...}}, ...],   # YAML -> JSON
     "errors": ["file: duplicate key ...", ...],                        # unparsable YAML
     "invalid": [{"file", "kind", "name", "version", "error"}, ...]}    # strict schema failures

Duplicate mapping keys are errors (PyYAML keeps the last one silently; the API server and
kubectl reject them). Validation is kubernetes-validate's strict mode: unknown fields fail too.
"""

from __future__ import annotations

import argparse
import json
import sys

import yaml


class StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate keys in a mapping."""


def _mapping(loader: StrictLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    seen = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r}", key_node.start_mark
            )
        seen.add(key)
    return loader.construct_mapping(node, deep)


StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--validate", default="", help="comma-separated Kubernetes versions")
    ap.add_argument("files", nargs="+")
    args = ap.parse_args()
    out: dict[str, list] = {"documents": [], "errors": [], "invalid": []}
    versions = [v for v in args.validate.split(",") if v]
    if versions:
        import kubernetes_validate
    for path in args.files:
        try:
            with open(path) as f:
                docs = list(yaml.load_all(f, Loader=StrictLoader))
        except yaml.YAMLError as e:
            out["errors"].append(f"{path}: {e}")
            continue
        for i, doc in enumerate(d for d in docs if d is not None):
            out["documents"].append({"file": path, "index": i, "object": doc})
            for version in versions:
                try:
                    kubernetes_validate.validate(doc, version, strict=True)
                except Exception as e:  # ValidationError, SchemaNotFoundError, ...
                    message = getattr(e, "message", None) or str(e)
                    out["invalid"].append(
                        {
                            "file": path,
                            "kind": doc.get("kind"),
                            "name": (doc.get("metadata") or {}).get("name"),
                            "version": version,
                            "error": f"{type(e).__name__}: {message}"[:500],
                        }
                    )
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
