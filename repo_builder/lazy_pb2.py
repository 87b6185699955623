"""Importing a generated ``*_pb2`` module cheaply: without running its package's heavy ``__init__``.

Offline validate parses thousands of configs and must not pay for gRPC, numpy or ONNX's C++ extension
just to get protobuf classes; ``triton_config`` and validate's ONNX reader import their protos here.
"""

from __future__ import annotations

import sys
import types
from pathlib import Path
from typing import Any

__all__ = ["import_pb2"]

# Packages whose __init__ is expensive and irrelevant to validate: importing a pb2 module from them
# installs the package as a stand-in that runs its real __init__ only when something else is used.
_DEFERRED_PACKAGES = frozenset({"tritonclient.grpc"})


class _DeferredPackage(types.ModuleType):
    """A package whose ``__init__`` has not run yet; the first missing attribute runs it in place."""

    def __getattr__(self, name: str) -> Any:
        self.__class__ = types.ModuleType  # type: ignore[assignment]  # demoted on purpose: an ordinary module from here on
        try:
            # installed by _deferred_package from a spec it checked has a loader
            assert self.__spec__ is not None and self.__spec__.loader is not None
            self.__spec__.loader.exec_module(self)
        except BaseException:
            sys.modules.pop(self.__name__, None)  # a later import retries from scratch
            raise
        return getattr(self, name)


def _deferred_package(package: str) -> types.ModuleType | None:
    import importlib.util

    module = sys.modules.get(package)
    if module is not None:
        return module
    if package not in _DEFERRED_PACKAGES:
        return None
    spec = importlib.util.find_spec(package)  # imports the parent (tritonclient: an empty __init__)
    if spec is None or spec.loader is None or not spec.submodule_search_locations:
        return None
    module = importlib.util.module_from_spec(spec)
    module.__class__ = _DeferredPackage
    sys.modules[package] = module
    parent, _, leaf = package.rpartition(".")
    if parent in sys.modules:
        setattr(sys.modules[parent], leaf, module)
    return module


def import_pb2(qualified_name: str) -> Any:
    """Import a generated ``*_pb2`` module without running its package's ``__init__``.

    ``tritonclient.grpc``'s ``__init__`` pulls in grpc, numpy and more (0.2 s or so), and ``onnx``'s its
    C++ extension; validate only needs the protobuf classes. The module is registered under its real
    name, so a later ordinary import reuses it instead of registering its protos twice. For
    ``tritonclient.grpc`` the package itself is registered as a stand-in holding the module, so that
    ``from tritonclient.grpc import model_config_pb2`` anywhere stays cheap, while any other use of the
    package (the gRPC client of ``validate --live``) runs its real ``__init__`` first.
    """
    module = sys.modules.get(qualified_name)
    if module is not None:
        return module
    import importlib.util

    package, _, leaf = qualified_name.rpartition(".")
    top = package.split(".")[0]
    spec = importlib.util.find_spec(top)
    if spec is None or not spec.submodule_search_locations:
        return importlib.import_module(qualified_name)
    file = Path(spec.submodule_search_locations[0], *package.split(".")[1:], f"{leaf}.py")
    if not file.is_file():
        return importlib.import_module(qualified_name)
    module_spec = importlib.util.spec_from_file_location(qualified_name, file)
    if module_spec is None or module_spec.loader is None:
        return importlib.import_module(qualified_name)
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[qualified_name] = module
    try:
        module_spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[qualified_name]
        raise
    holder = _deferred_package(package)
    if isinstance(holder, _DeferredPackage):
        object.__setattr__(holder, leaf, module)
    return module
