"""Rules RB4xx: platform and backend, and the model file each backend loads.

``resolve_backend`` mirrors core's ``AutoCompleteBackendFields`` (which Triton runs with and without
auto-complete) followed by the platform/backend checks of ``ValidateModelConfig``.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from repo_builder.validate.records import (
    Finding,
    ModelEntry,
    Rule,
    RuleContext,
    Severity,
    VersionDir,
    rule,
)
from repo_builder.validate.rules.layout import version_folder, versions_to_load

if TYPE_CHECKING:
    import ast

ENSEMBLE = "ensemble"
TF_SAVEDMODEL, TF_GRAPHDEF = "tensorflow_savedmodel", "tensorflow_graphdef"
TRT_PLAN, ORT_ONNX, LIBTORCH, LIBTORCH_ALT, TORCH_AOTI = (
    "tensorrt_plan",
    "onnxruntime_onnx",
    "pytorch_libtorch",
    "libtorch",
    "torch_aoti",
)
# The backend types core knows by name (GetBackendType / GetBackendTypeFromPlatform); others are "unknown"
# and pair with any platform.
_BACKEND_TYPE = {"tensorflow": "tf", "tensorrt": "trt", "onnxruntime": "ort", "pytorch": "torch"}
_PLATFORM_TYPE = {
    TF_GRAPHDEF: "tf",
    TF_SAVEDMODEL: "tf",
    TRT_PLAN: "trt",
    ORT_ONNX: "ort",
    LIBTORCH: "torch",
    TORCH_AOTI: "aoti",
}
# Backends shipped in NVIDIA's tritonserver containers; anything else needs its own library installed.
STANDARD_BACKENDS = frozenset(
    {
        "tensorrt",
        "onnxruntime",
        "pytorch",
        "tensorflow",
        "openvino",
        "python",
        "dali",
        "fil",
        "identity",
        "repeat",
        "square",
        "vllm",
        "tensorrtllm",
    }
)
# Backends that load a model file from the version folder (identity, repeat, fil ... read none we know of).
FILE_BACKENDS = frozenset({"tensorrt", "onnxruntime", "pytorch", "tensorflow", "openvino", "python", "dali"})
_CC_KEY = re.compile(r"^\d+\.\d+$")
MAX_PYTHON_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True)
class ResolvedBackend:
    """Platform, backend and model file name after Triton's server-side auto-completion."""

    platform: str
    backend: str
    default_model_filename: str
    detected_from: str | None = None  # e.g. "1/model.onnx" when found from the files
    first_folder: str | None = None  # the one subfolder Triton inspects
    problem: str | None = None  # Triton's message when it cannot decide


def _first_folder(model: ModelEntry) -> VersionDir | None:
    # Triton inspects only the first entry of a std::set of subfolder names: byte order.
    dirs = sorted(model.versions, key=lambda v: os.fsencode(v.name))
    return dirs[0] if dirs else None


def resolve_backend(model: ModelEntry) -> ResolvedBackend:
    """Fill ``platform``/``backend``/``default_model_filename`` from the config and file names as core does.

    Several rules ask per model, so the answer is kept on the model entry.
    """
    facts = model.facts
    resolved = facts.get(_resolve)
    if resolved is None:
        resolved = facts[_resolve] = _resolve(model)
    return resolved


def _resolve(model: ModelEntry) -> ResolvedBackend:
    config = model.config
    p = config.platform if config is not None else ""
    b = config.backend if config is not None else ""
    f = config.default_model_filename if config is not None else ""
    first = _first_folder(model)
    content = {e.name: e.is_dir for e in first.files} if first is not None else {}
    has_version = first is not None
    scan = not f and has_version  # file names are looked at only without a default_model_filename
    first_name = first.name if first is not None else None
    found: str | None = None

    def seen(name: str, want_dir: bool | None) -> bool:
        nonlocal found
        if name in content and (want_dir is None or content[name] == want_dir):
            found = f"{first_name}/{name}"
            return True
        return False

    def done(platform: str, backend: str, filename: str) -> ResolvedBackend:
        return ResolvedBackend(platform, backend, filename, found, first_name)

    # TensorFlow: only when neither platform nor a non-TF backend is given.
    if not p and b in ("", "tensorflow"):
        if f == "model.savedmodel":
            p = TF_SAVEDMODEL
        elif f == "model.graphdef":
            p = TF_GRAPHDEF
        elif scan:
            if seen("model.savedmodel", True):
                p = TF_SAVEDMODEL
            if seen("model.graphdef", False):
                p = TF_GRAPHDEF
    if p in (TF_SAVEDMODEL, TF_GRAPHDEF):
        return done(
            p, b or "tensorflow", f or ("model.savedmodel" if p == TF_SAVEDMODEL else "model.graphdef")
        )
    if not b and (p == TRT_PLAN or f == "model.plan" or (not p and scan and seen("model.plan", False))):
        b = "tensorrt"
    if b == "tensorrt":
        return done(p or TRT_PLAN, b, f or "model.plan")
    if not b and (p == ORT_ONNX or f == "model.onnx" or (not p and scan and seen("model.onnx", None))):
        b = "onnxruntime"
    if b == "onnxruntime":
        return done(p or ORT_ONNX, b, f or "model.onnx")
    if not b and (f == "model.xml" or (not p and scan and seen("model.xml", None))):
        b = "openvino"
    if b == "openvino":
        return done(p, b, f or "model.xml")
    if not b:
        if p in (LIBTORCH, LIBTORCH_ALT) or f == "model.pt" or p == TORCH_AOTI or f == "model.pt2":
            b = "pytorch"
        elif not p and scan:
            if "model.pt" in content:
                if seen("model.pt", False):
                    b, p = "pytorch", LIBTORCH
            elif seen("model.pt2", False):
                b, p = "pytorch", TORCH_AOTI
    if b == "pytorch":
        if not p:
            return done(LIBTORCH, b, f or "model.pt")
        if p == TORCH_AOTI and not f:
            return done(p, b, "model.pt2")
        return done(p, b, f)
    if not b and (f == "model.py" or (not p and scan and seen("model.py", None))):
        b = "python"
    if b == "python":
        return done(p, b, f or "model.py")
    if not b and not p and not f:
        name = config.name if config is not None and config.name else model.name
        if "." not in name:
            problem = (
                f"Invalid model name: Could not determine backend for model '{name}' with no backend in "
                "model configuration. Expected model name of the form 'model.<backend_name>'."
            )
            return ResolvedBackend("", "", "", None, first_name, problem)
        b = name.split(".", 1)[1]
        return ResolvedBackend("", b, f"model.{b}", f"the model name '{name}'", first_name)
    return done(p, b, f)


def _judged(model: ModelEntry, ctx: RuleContext) -> bool:
    """Whether platform rules apply: a readable model (hidden ones too: Triton loads them) whose config
    parsed, or is absent and auto-complete may fill it in (under --strict a missing config is refused
    first: RB105)."""
    if (model.problem or "").startswith("cannot list"):
        return False
    if model.config is not None:
        return True
    return not model.has_config_file and not ctx.options.strict


def _config_name(model: ModelEntry) -> str:
    return model.config.name if model.config is not None and model.config.name else model.name


@rule("RB401", "backend-undetermined")
def check_backend_undetermined(model: ModelEntry, ctx: RuleContext) -> Iterator[Finding]:
    """Neither the config nor the files tell Triton which backend runs the model.

    With no ``platform``, ``backend`` or ``default_model_filename``, Triton looks for a known model file
    (``model.plan``, ``model.onnx``, ``model.pt``, ``model.py``, ...) in the lexicographically first
    subfolder of the model only, and otherwise takes the backend from a model name such as
    ``model.identity``. The answer needs the model file: say ``backend:`` in the config to make it certain.

    Fails::

        models/classifier/config.pbtxt   # no platform/backend
        models/classifier/1/             # no model file

    Passes::

        models/classifier/config.pbtxt   # backend: "onnxruntime"
        models/classifier/1/model.onnx
    """
    if not _judged(model, ctx):
        return
    resolved = resolve_backend(model)
    if resolved.problem is None:
        return
    first = resolved.first_folder
    if first is None:
        hint = "needs the model file: add a version folder 1/ with it, or set backend: in config.pbtxt"
    else:
        hint = (
            f"needs the model file: Triton looks only in '{first}/' (the first subfolder by name); "
            "put model.onnx / model.plan / model.py there, or set backend: in config.pbtxt"
        )
    yield Finding(resolved.problem, hint=hint)


@rule("RB402", "platform-unknown")
def check_platform_unknown(model: ModelEntry, ctx: RuleContext) -> Iterator[Finding]:
    """The config names a platform (or model file name) from which no backend follows.

    Triton maps ``tensorrt_plan``, ``onnxruntime_onnx``, ``pytorch_libtorch``, ``tensorflow_graphdef``
    and ``tensorflow_savedmodel`` to their backends; ``ensemble`` needs none. Any other platform
    without a ``backend`` is refused.

    Fails: ``platform: "onnx"``

    Passes: ``platform: "onnxruntime_onnx"`` or ``backend: "onnxruntime"``
    """
    if not _judged(model, ctx):
        return
    resolved = resolve_backend(model)
    if resolved.problem is None and not resolved.backend and resolved.platform != ENSEMBLE:
        yield Finding(
            f"unexpected platform type '{resolved.platform}' for {_config_name(model)}",
            hint="use a known platform (tensorrt_plan, onnxruntime_onnx, pytorch_libtorch, ensemble) or set backend:",
        )


@rule("RB403", "platform-backend-mismatch")
def check_platform_backend_mismatch(model: ModelEntry, ctx: RuleContext) -> Iterator[Finding]:
    """``platform`` and ``backend`` name different runtimes, or an ensemble names a backend.

    Triton accepts any platform with a backend it does not know by name, but for tensorrt, onnxruntime,
    pytorch and tensorflow the two must agree.

    Fails: ``platform: "tensorrt_plan"`` with ``backend: "onnxruntime"``

    Passes: ``platform: "onnxruntime_onnx"`` with ``backend: "onnxruntime"``
    """
    if not _judged(model, ctx):
        return
    resolved = resolve_backend(model)
    p, b = resolved.platform, resolved.backend
    if not b:
        return
    if p == ENSEMBLE:
        yield Finding(
            f"Ensemble model '{_config_name(model)}' must have platform type '{p}' and empty backend type",
            hint="remove the backend: line",
        )
        return
    backend_type = _BACKEND_TYPE.get(b)
    if backend_type is not None and backend_type != _PLATFORM_TYPE.get(p):
        yield Finding(
            f"unexpected 'platform' and 'backend' pair, got:{p}, {b}",
            hint="remove platform: and keep backend:, or make them name the same runtime",
        )


@rule("RB404", "backend-not-standard", Severity.WARNING)
def check_backend_not_standard(model: ModelEntry, ctx: RuleContext) -> Iterator[Finding]:
    """The backend is not one shipped in NVIDIA's Triton containers.

    A custom backend loads only if its library is installed in Triton's backend folder. When the name
    came from the model folder's name (``model.<backend>``, because the config says nothing) it is
    almost always a mistake and is an error.

    Fails: a folder ``my.model`` without a config (backend ``model`` is looked for).

    Passes: ``backend: "python"``
    """
    if not _judged(model, ctx):
        return
    resolved = resolve_backend(model)
    b = resolved.backend
    if not b or b in STANDARD_BACKENDS or resolved.problem is not None:
        return
    from_name = resolved.detected_from is not None and resolved.detected_from.startswith("the model name")
    yield Finding(
        f"unable to find backend library for backend '{b}', try specifying runtime on the model configuration.",
        severity=Severity.ERROR if from_name else None,
        hint=(
            f"the backend was taken from {resolved.detected_from}; set backend: in config.pbtxt"
            if from_name
            else f"install the '{b}' backend in Triton's backends folder, or fix the backend name"
        ),
    )


def _default_file(resolved: ResolvedBackend) -> str | None:
    """The file each known backend loads when ``default_model_filename`` is empty."""
    if resolved.default_model_filename:
        return resolved.default_model_filename
    if resolved.backend == "pytorch":
        return "model.pt2" if resolved.platform == TORCH_AOTI else "model.pt"
    return {"dali": "model.dali"}.get(resolved.backend)


def _missing(v: VersionDir, name: str, backend: str, platform: str) -> str | None:
    """Why ``name`` in version folder ``v`` cannot be the model file, or None when it can."""
    entry = v.entry(name)
    if entry is None:
        return "is missing"
    if entry.size is None and not entry.is_dir:
        return "cannot be read (a broken symlink?)"
    wants_dir = backend == "tensorflow" and platform == TF_SAVEDMODEL
    if backend == "onnxruntime":
        # A folder is allowed for models with external data: the graph is then <folder>/model.onnx.
        if entry.is_dir and not (v.path / name / "model.onnx").is_file():
            return "is a folder without model.onnx inside"
        return None
    if wants_dir and not entry.is_dir:
        return "must be a folder (a TensorFlow SavedModel)"
    if not wants_dir and entry.is_dir:
        return "is a folder, not a file"
    return None


def _needs_file(model: ModelEntry, ctx: RuleContext) -> ResolvedBackend | None:
    if not _judged(model, ctx) or model.is_ensemble:
        return None
    resolved = resolve_backend(model)
    if resolved.problem is not None or resolved.backend not in FILE_BACKENDS:
        return None
    return resolved


def _recipe_file() -> str:
    from repo_builder.compile.pending import RECIPE_FILE

    return RECIPE_FILE


def _cc_filenames(model: ModelEntry) -> dict[str, str]:
    return dict(model.config.cc_model_filenames) if model.config is not None else {}


@rule("RB405", "model-file-missing")
def check_model_file_missing(model: ModelEntry, ctx: RuleContext) -> Iterator[Finding]:
    """A version that Triton loads lacks the file its backend reads.

    Defaults: ``model.plan`` (TensorRT), ``model.onnx`` (ONNX Runtime; a file, or a folder holding
    ``model.onnx`` and its external data), ``model.pt`` (PyTorch), ``model.pt2`` (torch_aoti),
    ``model.graphdef``, ``model.savedmodel/`` (TensorFlow), ``model.xml`` + ``model.bin`` (OpenVINO),
    ``model.py`` (Python), ``model.dali`` (DALI); ``default_model_filename`` overrides the name. A Python
    model without ``model.py`` is worse than an error: Triton 2.51 waits on the stub until a timeout.
    When ``cc_model_filenames`` is set, a missing default file is a warning (GPUs whose compute
    capability is listed load their own file).

    Fails::

        models/add_sub/config.pbtxt   # backend: "python"
        models/add_sub/1/             # no model.py

    Passes::

        models/add_sub/1/model.py
    """
    resolved = _needs_file(model, ctx)
    if resolved is None:
        return
    name = _default_file(resolved)
    if not name:
        return
    cc = _cc_filenames(model)
    for number in versions_to_load(model):
        v = version_folder(model, number)
        if v is None:
            continue  # RB108 says why
        if resolved.backend == "tensorrt" and v.has(_recipe_file()):
            continue  # a plan still to be compiled: RB701 (tensorrt-plan-pending) reports it
        why = _missing(v, name, resolved.backend, resolved.platform)
        if why is None and resolved.backend == "openvino":
            weights = str(Path(name).with_suffix(".bin"))
            why_bin = _missing(v, weights, resolved.backend, resolved.platform)
            if why_bin is not None:
                yield Finding(
                    f"version {number} of model '{model.name}': '{v.name}/{weights}' {why_bin} "
                    f"(OpenVINO reads the weights beside {name})",
                    path=v.path / weights,
                    version=number,
                    hint=f"put {weights} next to {name}",
                )
            continue
        if why is None:
            continue
        hint = f"put {name} in {model.name}/{v.name}/"
        if resolved.backend == "python":
            hint += "; without it Triton 2.51 does not fail but waits for the Python stub until the load times out"
        if cc:
            hint += f"; GPUs with compute capability {', '.join(sorted(cc))} use cc_model_filenames instead"
        yield Finding(
            f"unable to find '{model.name}/{v.name}/{name}' for model '{model.name}': the file {why} "
            f"(backend '{resolved.backend}' loads it for version {number})",
            path=v.path / name,
            version=number,
            severity=Severity.WARNING if cc else None,
            hint=hint,
        )


@rule("RB406", "cc-model-filenames-invalid")
def check_cc_model_filenames(model: ModelEntry, ctx: RuleContext) -> Iterator[Finding]:
    """``cc_model_filenames`` keys must be compute capabilities and their files must exist (non-TensorRT).

    On a GPU instance Triton looks up the GPU's compute capability as ``"<major>.<minor>"`` (e.g.
    ``"8.6"``) in ``cc_model_filenames`` and loads that file instead of ``default_model_filename``. A key
    such as ``"sm_86"`` or ``"86"`` never matches; a listed file that is missing fails the load on that
    GPU. TensorRT models are checked by RB706 (tensorrt-cc-model-filenames) instead.

    Fails: ``cc_model_filenames { key: "sm_86" value: "model_sm86.onnx" }``

    Passes: ``cc_model_filenames { key: "8.6" value: "model_sm86.onnx" }`` with ``1/model_sm86.onnx``
    """
    if model.config is None or not model.config.cc_model_filenames or not _judged(model, ctx) or model.is_ensemble:
        return
    resolved = resolve_backend(model)
    if resolved.backend == "tensorrt":
        return  # RB706 (tensorrt-cc-model-filenames) checks plans, with their sidecars
    cc = _cc_filenames(model)
    for key in sorted(cc):
        if not _CC_KEY.match(key):
            yield Finding(
                f"cc_model_filenames key '{key}' is not a compute capability; Triton looks up keys like '8.6'",
                hint='write the key as <major>.<minor>, e.g. "8.6" for an RTX A6000, "9.0" for an H100',
            )
    for number in versions_to_load(model):
        v = version_folder(model, number)
        if v is None:
            continue
        for key, filename in sorted(cc.items()):
            why = _missing(v, filename, resolved.backend, resolved.platform)
            if why is not None:
                yield Finding(
                    f"cc_model_filenames['{key}'] names '{model.name}/{v.name}/{filename}', which {why}",
                    path=v.path / filename,
                    version=number,
                    hint=f"build {filename} for compute capability {key}, or remove the entry",
                )


def _top_level_names(body: list[ast.stmt]) -> tuple[set[str], dict[str, ast.ClassDef], bool]:
    """Names a module binds at top level (through if/try blocks too), its classes, and star imports."""
    import ast
    names: set[str] = set()
    classes: dict[str, ast.ClassDef] = {}
    star = False
    for node in body:
        if isinstance(node, ast.ClassDef):
            names.add(node.name)
            classes[node.name] = node
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            names.add(node.name)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            for alias in node.names:
                if alias.name == "*":
                    star = True
                names.add(alias.asname or alias.name.split(".")[0])
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign | ast.AugAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        blocks: list[list[ast.stmt]] = []
        if isinstance(node, ast.If | ast.For | ast.While | ast.With):
            blocks = [node.body, node.orelse] if not isinstance(node, ast.With) else [node.body]
        elif isinstance(node, ast.Try):
            blocks = [node.body, node.orelse, node.finalbody, *[h.body for h in node.handlers]]
        for block in blocks:
            n, c, s = _top_level_names(block)
            names |= n
            classes.update(c)
            star |= s
    return names, classes, star


def check_python_source(source: bytes, filename: str) -> list[tuple[str, int | None, int | None, Severity]]:
    """Problems of a Python backend ``model.py`` read with ``ast`` (never imported): (message, line, col, severity)."""
    return list(_python_problems(source, filename))


@lru_cache(maxsize=512)
def _python_problems(source: bytes, filename: str) -> tuple[tuple[str, int | None, int | None, Severity], ...]:
    # Generated repositories repeat the same model.py many times: parse each distinct text once.
    return tuple(_check_python_source(source, filename))


def _check_python_source(source: bytes, filename: str) -> list[tuple[str, int | None, int | None, Severity]]:
    import ast  # only Python models need it
    try:
        tree = ast.parse(source, filename=filename)
    except SyntaxError as exc:
        return [(f"{filename} does not parse: {exc.msg}", exc.lineno, exc.offset, Severity.ERROR)]
    except (ValueError, UnicodeDecodeError) as exc:  # null bytes, undecodable text
        return [(f"{filename} is not Python source: {exc}", None, None, Severity.ERROR)]
    names, classes, star = _top_level_names(tree.body)
    if "TritonPythonModel" not in names:
        if star:
            return []
        return [
            (
                f"{filename} defines no class 'TritonPythonModel'; the Python backend fails with "
                "AttributeError: module 'model' has no attribute 'TritonPythonModel'",
                None,
                None,
                Severity.ERROR,
            )
        ]
    cls = classes.get("TritonPythonModel")
    if cls is not None and not cls.bases:
        methods = {n.name for n in cls.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
        if "execute" not in methods:
            return [
                (
                    f"{filename}: class TritonPythonModel has no 'execute' method; every request will fail",
                    cls.lineno,
                    cls.col_offset + 1,
                    Severity.WARNING,
                )
            ]
    return []


@rule("RB407", "python-model-invalid")
def check_python_model(model: ModelEntry, ctx: RuleContext) -> Iterator[Finding]:
    """A Python backend ``model.py`` that does not parse or defines no ``TritonPythonModel``.

    The file is read with ``ast`` and never imported. The Python backend imports it and instantiates
    ``TritonPythonModel``; a syntax error or a missing class fails the load, a class without
    ``execute`` fails every request.

    Fails::

        class Model:            # wrong name
            def execute(self, requests): ...

    Passes::

        class TritonPythonModel:
            def execute(self, requests): ...
    """
    resolved = _needs_file(model, ctx)
    if resolved is None or resolved.backend != "python":
        return
    name = _default_file(resolved) or "model.py"
    for number in versions_to_load(model):
        v = version_folder(model, number)
        entry = v.entry(name) if v is not None else None
        if v is None or entry is None or entry.is_dir or entry.size is None:
            continue
        path = v.path / name
        if entry.size > MAX_PYTHON_BYTES:
            yield Finding(
                f"{name} is {entry.size} bytes; not checked",
                path=path,
                version=number,
                severity=Severity.INFO,
            )
            continue
        try:
            if not stat.S_ISREG(os.stat(path).st_mode):  # a pipe would block the read
                yield Finding(f"{name} is not a regular file", path=path, version=number)
                continue
            source = path.read_bytes()
        except OSError as exc:
            yield Finding(f"cannot read {name}: {exc.strerror or exc}", path=path, version=number)
            continue
        for message, line, column, severity in check_python_source(source, name):
            hint = (
                "fix the syntax; Triton imports this file"
                if "does not parse" in message or "not Python" in message
                else "the Python backend instantiates a class named TritonPythonModel with execute(self, requests)"
            )
            yield Finding(
                message, path=path, version=number, severity=severity, line=line, column=column, hint=hint
            )


RULES: tuple[Rule, ...] = (
    check_backend_undetermined,
    check_platform_unknown,
    check_platform_backend_mismatch,
    check_backend_not_standard,
    check_model_file_missing,
    check_cc_model_filenames,
    check_python_model,
)
