"""A KServe ``InferenceService`` for a published repository: Triton as the predictor, the prefix as storage.

The document is plain data (``inference_service``) written as YAML by a small emitter (no YAML package
needed: the values are strings, numbers, lists and mappings). The tests check it against KServe's own
schema as its Python SDK's generated models declare it (tests/support/kserve_schema.py).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from repo_builder.errors import UserError
from repo_builder.fsutil import write_text_atomic
from repo_builder.store.urls import StoreUrl

# Kubernetes object names for a Service-backed resource: an RFC 1035 label.
_NAME = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")
DEFAULT_TRITON_IMAGE_TAG = "24.08-py3"  # the release the embedded server (2.51) comes from


@dataclass(frozen=True)
class KServeSettings:
    name: str
    storage_uri: str  # s3://bucket/prefix (KServe's own form: the endpoint goes in the credentials secret)
    runtime_version: str = DEFAULT_TRITON_IMAGE_TAG
    cpu: str = "1"
    memory: str = "2Gi"
    gpus: int = 0
    service_account: str | None = None  # holds the S3 credentials secret (KServe's s3 annotations)
    min_replicas: int = 1


def check_name(name: str) -> str:
    if not _NAME.match(name):
        raise UserError(
            f"--kserve {name!r}: not a valid InferenceService name; use at most 63 lower-case letters, "
            "digits and '-', starting with a letter"
        )
    return name


def settings_for(
    name: str, location: StoreUrl, gpus: int = 0, service_account: str | None = None, release: str | None = None
) -> KServeSettings:
    """``release``: the Triton release the repository was built for (its manifest's target), whose stock image
    KServe must run: shipped packages are built for that image's Python. None: the embedded server's release."""
    version = f"{release}-py3" if release else DEFAULT_TRITON_IMAGE_TAG
    return KServeSettings(name=check_name(name), storage_uri=location.url, gpus=gpus, service_account=service_account,
                          runtime_version=version)


def inference_service(s: KServeSettings) -> dict[str, Any]:
    """The InferenceService document (serving.kserve.io/v1beta1) for Triton serving ``s.storage_uri``."""
    limits: dict[str, Any] = {"cpu": s.cpu, "memory": s.memory}
    if s.gpus:
        limits["nvidia.com/gpu"] = str(s.gpus)
    model: dict[str, Any] = {
        "modelFormat": {"name": "triton"},
        "protocolVersion": "v2",
        "runtimeVersion": s.runtime_version,
        "storageUri": s.storage_uri,
        "resources": {"requests": dict(limits), "limits": limits},
    }
    predictor: dict[str, Any] = {"minReplicas": s.min_replicas, "model": model}
    if s.service_account:
        predictor["serviceAccountName"] = s.service_account
    return {
        "apiVersion": "serving.kserve.io/v1beta1",
        "kind": "InferenceService",
        "metadata": {"name": s.name, "annotations": {"repo-builder/published-from": s.storage_uri}},
        "spec": {"predictor": predictor},
    }


def _scalar(value: Any) -> str:
    if isinstance(value, bool) or value is None or isinstance(value, (int, float)):
        return json.dumps(value)
    return json.dumps(str(value))  # a JSON string is a valid YAML double-quoted scalar


def to_yaml(value: Any, indent: int = 0) -> str:
    """Block-style YAML for mappings, lists and scalars (strings always quoted)."""
    pad = "  " * indent
    lines = []
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(item, (dict, list)) and item:
                lines.append(f"{pad}{key}:\n{to_yaml(item, indent + 1)}")
            else:
                lines.append(f"{pad}{key}: {_scalar(item) if not isinstance(item, (dict, list)) else '{}' if isinstance(item, dict) else '[]'}")
    elif isinstance(value, list):
        for item in value:
            body = to_yaml(item, indent + 1).lstrip() if isinstance(item, (dict, list)) else _scalar(item)
            lines.append(f"{pad}- {body}")
    else:
        lines.append(f"{pad}{_scalar(value)}")
    return "\n".join(lines) + ("\n" if indent == 0 else "")


def write_inference_service(s: KServeSettings, folder: Path) -> Path:
    """Write ``<name>.inferenceservice.yaml`` into ``folder``; return its path."""
    path = Path(folder) / f"{s.name}.inferenceservice.yaml"
    header = (
        f"# KServe InferenceService for {s.storage_uri}, written by repo-builder publish.\n"
        "# The S3 credentials (and endpoint, for MinIO and other S3-compatible stores) come from the\n"
        "# service account's secret: see docs/deploy.md.\n"
    )
    try:
        write_text_atomic(path, header + to_yaml(inference_service(s)))
    except OSError as exc:
        raise UserError(f"{path}: cannot write the InferenceService ({exc.strerror or exc})") from None
    return path
