"""KServe's InferenceService schema, read from KServe's own Python SDK (PyPI ``kserve``, installed with
``--no-deps`` by scripts/setup, with ``kubernetes`` for the core types).

The SDK's model classes are generated from the same OpenAPI definitions as KServe's CRD: every class lists
its fields (``attribute_map``: python name -> JSON name) and their types (``openapi_types``). Only the model
modules are loaded (the packages' ``__init__`` would import KServe's whole server stack).
"""

from __future__ import annotations

import importlib
import importlib.util
import re
import sys
import types
from pathlib import Path
from typing import Any

import pytest

_PRIMITIVES: dict[str, tuple[type, ...]] = {
    "str": (str,),
    "int": (int,),
    "bool": (bool,),
    "float": (int, float),
    "object": (object,),
    "datetime": (str,),
}


def _package_root(top: str) -> Path:
    loaded = sys.modules.get(top)
    if loaded is not None and getattr(loaded, "__path__", None):
        return Path(next(iter(loaded.__path__)))
    spec = importlib.util.find_spec(top)
    if spec is None or not spec.submodule_search_locations:
        pytest.skip(reason=f"{top} (installed by scripts/setup) is not installed", allow_module_level=True)
    return Path(next(iter(spec.submodule_search_locations)))


def _shell_packages(*names: str) -> None:
    """Register bare package modules so ``pkg.sub.module`` imports without running ``pkg/__init__.py``."""
    for name in names:
        if name in sys.modules and getattr(sys.modules[name], "__path__", None):
            continue
        top, *rest = name.split(".")
        module = types.ModuleType(name)
        module.__path__ = [str(_package_root(top).joinpath(*rest))]
        sys.modules[name] = module


def _model_class(type_name: str) -> type:
    """``V1beta1ModelSpec`` -> kserve.models.v1beta1_model_spec; ``V1ObjectMeta`` -> kubernetes' models."""
    snake = re.sub(r"(?<!^)(?=[A-Z])", "_", type_name).lower()
    if type_name.startswith(("V1alpha", "V1beta")):
        _shell_packages("kserve", "kserve.models")
        snake = re.sub(r"^v1_(alpha|beta)(\d)_", r"v1\g<1>\g<2>_", snake)
        return getattr(importlib.import_module(f"kserve.models.{snake}"), type_name)
    _shell_packages("kubernetes", "kubernetes.client", "kubernetes.client.models")
    snake = re.sub(r"^v(\d)_", r"v\1_", snake)
    return getattr(importlib.import_module(f"kubernetes.client.models.{snake}"), type_name)


def schema_errors(doc: Any, type_name: str = "V1beta1InferenceService", path: str = "") -> list[str]:
    """Unknown fields and mistyped values of ``doc`` against the SDK's generated schema of ``type_name``."""
    if m := re.fullmatch(r"(?:list|List)\[(.+)\]", type_name):
        if not isinstance(doc, list):
            return [f"{path}: expected a list"]
        return [e for i, item in enumerate(doc) for e in schema_errors(item, m.group(1), f"{path}[{i}]")]
    if m := re.fullmatch(r"(?:dict|Dict)[(\[]str, (.+)[)\]]", type_name):
        if not isinstance(doc, dict):
            return [f"{path}: expected a mapping"]
        return [e for k, v in doc.items() for e in schema_errors(v, m.group(1), f"{path}.{k}")]
    if type_name in _PRIMITIVES:
        ok = isinstance(doc, _PRIMITIVES[type_name]) and not (type_name == "int" and isinstance(doc, bool))
        return [] if ok else [f"{path}: expected {type_name}, got {type(doc).__name__}"]
    if type_name == "ResourceQuantity" or type_name.endswith("Quantity"):
        return [] if isinstance(doc, str | int | float) else [f"{path}: expected a quantity"]
    cls = _model_class(type_name)
    if not isinstance(doc, dict):
        return [f"{path}: expected an object ({type_name})"]
    by_json = {json_name: py for py, json_name in cls.attribute_map.items()}
    errors = []
    for key, value in doc.items():
        if key not in by_json:
            errors.append(f"{path}.{key}: not a field of {type_name}")
        else:
            errors.extend(schema_errors(value, cls.openapi_types[by_json[key]], f"{path}.{key}"))
    return errors
