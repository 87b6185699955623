"""repo-builder: build Triton model repositories that load the first time, and prove it before deploy.

The Python API (docs/api.md) mirrors the commands::

    import repo_builder

    report = repo_builder.validate("models/")              # -> Report (report.ok, report.diagnostics)
    artifact = repo_builder.export_resnet50(Path("export"), weights="random")
    outcome = repo_builder.build(repo_builder.BuildRequest("resnet50", Path("models"),
                                                           params={"from_export": Path("export")}))
    with repo_builder.serve("models/") as serving:         # every model loaded; stopped on leaving
        print(serving.server.http_url, serving.rows)
    repo_builder.publish_repository("models/", "s3://bucket/models")  # -> PublishResult
    repo_builder.pull_repository("s3://bucket/models", "pulled/")      # -> PullResult

Every name is imported on first use (as ``pip`` loads its commands), so ``import repo_builder`` stays
light and ``repo-builder validate`` never imports torch. Errors: ``repo_builder.errors`` (``UserError``
for bad input, ``RefusedError``, ``ToolError`` for a failing tool or machine).
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any

__version__ = "0.1.0"

# public name -> "module:attribute"; the module is imported when the name is first used.
API: dict[str, str] = {
    # validate (``repo_builder.validate`` itself is below)
    "validate_location": "repo_builder.validate.location:validate_location",
    "ValidateOptions": "repo_builder.validate.records:ValidateOptions",
    "validate_live_location": "repo_builder.live.location:validate_live_location",
    "LiveSettings": "repo_builder.live.judge:LiveSettings",
    "Report": "repo_builder.validate.report:Report",
    "render_report": "repo_builder.validate.reporters:render_report",
    # export (torch is imported when an export runs, not here)
    "export_resnet50": "repo_builder.export.resnet50:export_resnet50",
    "export_text_classifier": "repo_builder.export.text_classifier:export_text_classifier",
    "export_torchvision_classifier": "repo_builder.export.torchvision_classifier:export_torchvision_classifier",
    # build
    "build": "repo_builder.pipelines.build_request:build",
    "BuildRequest": "repo_builder.pipelines.build_request:BuildRequest",
    # publish and pull (s3fs is imported when a store is opened, not here)
    "publish_repository": "repo_builder.repository.publish:publish_repository",
    "PublishOptions": "repo_builder.repository.publish:PublishOptions",
    "pull_repository": "repo_builder.repository.pull:pull_repository",
    "PullOptions": "repo_builder.repository.pull:PullOptions",
    "parse_store_url": "repo_builder.store.urls:parse_store_url",
    # serve
    "serve": "repo_builder.triton.serving:serve",
    "ServeSettings": "repo_builder.triton.serving:ServeSettings",
    "ServerOptions": "repo_builder.triton.arguments:ServerOptions",
    # error roots (exit codes 2, 1, 3)
    "UserError": "repo_builder.errors:UserError",
    "RefusedError": "repo_builder.errors:RefusedError",
    "ToolError": "repo_builder.errors:ToolError",
}
# ``validate`` is both the subpackage repo_builder.validate and the function repo_builder.validate(...):
# the import system binds the subpackage to this name, so the subpackage itself is made callable.
_VALIDATE = "repo_builder.api:validate"
_VALIDATE_DOC = (
    "Validation of Triton model repositories. Call it: repo_builder.validate(path_or_url, *, strict=False, "
    "gpu=None, live=False, ...) -> Report; see repo_builder.api.validate."
)

__all__ = ["API", "__version__", "validate", *API]


def _resolve(target: str) -> Any:
    module, _, attribute = target.partition(":")
    return getattr(importlib.import_module(module), attribute)


class _CallableValidatePackage(types.ModuleType):
    """The ``repo_builder.validate`` subpackage, callable as ``repo_builder.validate(path_or_url, ...)``."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """``repo_builder.validate(path_or_url, *, strict=False, gpu=None, live=False, ...) -> Report``:
        see ``repo_builder.api.validate``."""
        return _resolve(_VALIDATE)(*args, **kwargs)


class _ApiModule(types.ModuleType):
    def __setattr__(self, name: str, value: Any) -> None:
        if name == "validate" and isinstance(value, types.ModuleType):
            value.__class__ = _CallableValidatePackage
            value.__doc__ = value.__doc__ or _VALIDATE_DOC
        super().__setattr__(name, value)


def __getattr__(name: str) -> Any:
    if name == "validate":
        return importlib.import_module("repo_builder.validate")  # binding it here makes it callable
    target = API.get(name)
    if target is None:
        raise AttributeError(f"module 'repo_builder' has no attribute '{name}'")
    value = _resolve(target)
    globals()[name] = value  # resolved once
    return value


def __dir__() -> list[str]:
    return sorted({"__version__", "API", "validate", *API})


sys.modules[__name__].__class__ = _ApiModule
