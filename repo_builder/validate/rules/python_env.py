"""Rules RB4xx (Python environment): what a Python step imports, and from where, in the image it is deployed in.

The image is ``--triton-release``'s stock ``nvcr.io/nvidia/tritonserver:<release>-py3`` (``--platform``),
else the target ``repo-builder.json`` records (analysis/deploy.py); without one RB421 and RB422 judge
nothing and the report says so. The step's source is read with ``ast`` (analysis/python_imports.py), its
package folders listed and their wheel metadata read (analysis/shipped_packages.py): nothing of the
repository is imported or run.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from repo_builder.deploy_target import DeployTarget
from repo_builder.triton_layout import MAX_PYTHON_BYTES
from repo_builder.validate.analysis.files import (
    UnsafeFile,
    read_bounded,
    regular_file_size,
    relative_inside,
    resolves_inside,
)
from repo_builder.validate.analysis.image_modules import distribution_for, image_modules
from repo_builder.validate.analysis.python_imports import ImportedModule, python_imports
from repo_builder.validate.analysis.python_step import (
    EXECUTION_ENV_PATH,
    StepVersion,
    execution_env_path,
    is_python_step,
    python_step_versions,
)
from repo_builder.validate.analysis.server_paths import judge_server_path
from repo_builder.validate.analysis.shipped_packages import (
    Distribution,
    PackageFolder,
    step_packages,
    unnamed_package_folders,
)
from repo_builder.validate.analysis.stdlib_names import STDLIB_VERSIONS, stdlib_modules
from repo_builder.validate.analysis.wheel_tags import Abi, extension_problem, tag_problem
from repo_builder.validate.records import Finding, ModelEntry, Rule, RuleContext, Severity, rule

MODEL_DIRECTORY = "$$TRITON_MODEL_DIRECTORY"  # python_backend python_be.cc: replaced by the model folder
MAX_LOCAL_MODULES = 32  # the step's own modules followed for their imports (1/helper.py ...)


def _pip_hint(deploy: DeployTarget, target: str, requirement: str) -> str:
    arch = deploy.platform
    # pip does not widen a manylinux_2_Y --platform to older tags: name the two that cover most wheels.
    platforms = f"--platform manylinux_2_28_{arch} --platform manylinux2014_{arch}"
    return f"pip install --target {target} --python-version {deploy.python} {platforms} --only-binary=:all: {requirement}"


def _stdlib_elsewhere(name: str, python: str) -> str | None:
    versions = [v for v in STDLIB_VERSIONS if v != python and name in stdlib_modules(v)]
    return f"'{name}' is in the standard library of Python {', '.join(versions)}, not of {python}" if versions else None


def _missing_hint(model: ModelEntry, step: StepVersion, name: str, deploy: DeployTarget, root: Path) -> str:
    folder = f"{model.name}/{step.folder.name}"
    hint = [f"ship it: `repo-builder build ... --triton-release {deploy.release}` ships what its steps import; by hand, "
            f"`{_pip_hint(deploy, f'{folder}/site-packages', distribution_for(name))}` and put that folder first on "
            "sys.path in model.py (a line naming \"site-packages\")",
            "or build an image that has it: `repo-builder build ... --step-packages dockerfile` writes its Dockerfile"]
    stdlib = _stdlib_elsewhere(name, deploy.python)
    if stdlib is not None:
        hint.insert(0, stdlib)
    unnamed = unnamed_package_folders(step.folder, step.imports, name, root)
    if unnamed:
        hint.insert(0, f"{folder}/{unnamed[0]} holds {name}, but model.py never names '{unnamed[0]}', so it is not on sys.path")
    return "; ".join(hint)


def _image_words(deploy: DeployTarget) -> str:
    extra = " with what the repository's Dockerfile installs" if deploy.step_packages == "dockerfile" else ""
    return f"{deploy.image_name} (Python {deploy.python}){extra}"


def _relative_problem(imp: ImportedModule, step: StepVersion, own: frozenset[str]) -> str | None:
    """The stub imports model.py as '<version>.model': one dot is the version folder, two leave it."""
    if imp.level > 1:
        return "ImportError: attempted relative import beyond top-level package"
    if imp.name in own:
        return None
    if imp.member:
        return f"ImportError: cannot import name '{imp.name}' from '{step.folder.name}' (unknown location)"
    return f"ModuleNotFoundError: No module named '{step.folder.name}.{imp.name}'"


def _relative_hint(model: ModelEntry, step: StepVersion, imp: ImportedModule) -> str:
    if imp.level > 1:
        return (f"import it by name ('import {imp.name}'): the stub puts the version folder and the model folder "
                f"{model.name}/ on sys.path")
    return f"put {imp.name}.py (or the package folder {imp.name}/) in {model.name}/{step.folder.name}/"


def _local_modules(step: StepVersion, names: set[str], root: Path) -> Iterator[tuple[Path, ImportedModule]]:
    """Required absolute imports of the step's own top-level modules that model.py (transitively) imports."""
    queue = sorted(names)
    seen: set[str] = set()
    while queue and len(seen) < MAX_LOCAL_MODULES:
        name = queue.pop(0)
        entry = step.folder.entry(f"{name}.py")
        if name in seen or entry is None or entry.escapes or entry.size is None or entry.size > MAX_PYTHON_BYTES:
            continue
        seen.add(name)
        path = step.folder.path / entry.name
        try:
            imports = python_imports(read_bounded(path, root, MAX_PYTHON_BYTES), entry.name)
        except UnsafeFile:
            continue
        for imp in imports.modules:
            if imp.required and not imp.level:
                yield path, imp
                queue.append(imp.name)


def _step_import_findings(model: ModelEntry, step: StepVersion, deploy: DeployTarget, ctx: RuleContext) -> Iterator[Finding]:
    root = ctx.repository.root
    packages = step_packages(model, step.folder, step.imports)
    image, shipped = image_modules(deploy, ctx.options.image_provides), packages.modules
    own = packages.folders[0].modules  # the version folder: what a relative import reaches
    reported: set[tuple[Path, str]] = set()
    required = [(step.path, imp) for imp in step.imports.modules if imp.required]
    local = {i.name for _, i in required if i.level <= 1}  # absolute or from the version folder: maybe the step's own
    for path, imp in [*required, *_local_modules(step, local, root)]:
        if (path, imp.name) in reported:
            continue
        if imp.level:
            why = _relative_problem(imp, step, own)
            if why is not None:
                reported.add((path, imp.name))
                yield Finding(f"{why}: '{imp.statement}' reaches only {model.name}/{step.folder.name}/ (the stub imports "
                              f"{path.name} as '{step.folder.name}.{path.stem}')", path=path, version=step.number,
                              line=imp.line, column=imp.column,
                              hint=_relative_hint(model, step, imp))
        elif imp.name not in image and imp.name not in shipped:
            reported.add((path, imp.name))
            yield Finding(
                f"ModuleNotFoundError: No module named '{imp.name}' in {_image_words(deploy)}: '{imp.statement}' needs it, "
                "and neither the image nor the model's folders provide it",
                path=path, version=step.number, line=imp.line, column=imp.column,
                hint=_missing_hint(model, step, imp.name, deploy, root),
            )


@rule("RB421", "python-import-missing", quiet="python_env_unjudged")
def check_python_import_missing(model: ModelEntry, ctx: RuleContext) -> Iterator[Finding]:
    """A Python step imports a module that neither the target image nor the model's folders provide.

    The Python backend's stub runs ``model.py`` on the image's own Python. NVIDIA's stock
    ``tritonserver:<release>-py3`` image gives it the standard library of that Python (3.12 in 24.12, 3.10
    in Ubuntu 22.04 releases such as 24.05), ``numpy<2``, ``wheel``, ``setuptools`` and ``virtualenv`` (with
    their dependencies) and ``triton_python_backend_utils``: no PIL, OpenCV, tokenizers or onnxruntime. The
    stub appends the version folder and the model folder to ``sys.path``, so the step's own modules and
    packages shipped there import, and so does a subfolder (``1/site-packages/``) that ``model.py`` puts on
    ``sys.path`` itself (validate counts a subfolder that a string literal of ``model.py`` names). Anything
    else fails the load with the stub's ``ModuleNotFoundError``, reported by Triton only as "Stub process ...
    is not healthy". With ``--step-packages dockerfile`` the modules the repository's Dockerfile installs
    (``repo-builder.json``) count as the image's.

    An import counts wherever it runs: at module level, in a class body, in ``initialize`` or ``execute``;
    the step's own modules (``1/helper.py``) are followed. An import inside ``try:`` that catches
    ``ImportError`` (or ``Exception``), under ``contextlib.suppress(ImportError)`` or under a check of
    ``sys.version_info``/``sys.platform`` is optional and not reported; ``if TYPE_CHECKING:`` never runs.
    Relative imports reach the version folder (the stub imports ``model.py`` as ``<version>.model``).
    Judged only with a target (``--triton-release``, or the one ``repo-builder.json`` records); a step
    with ``EXECUTION_ENV_PATH`` runs in its own environment and is not judged (an info says so).

    Fails (``validate --triton-release 24.12``)::

        models/preprocess/1/model.py:   from PIL import Image

    Passes: the same with Pillow shipped for the image and its folder put on ``sys.path``::

        models/preprocess/1/site-packages/PIL/...
        models/preprocess/1/site-packages/pillow-11.0.0.dist-info/WHEEL   # Tag: cp312-cp312-manylinux_2_28_x86_64
        models/preprocess/1/model.py:   sys.path.insert(0, os.path.join(os.path.dirname(__file__), "site-packages"))
    """
    deploy = ctx.options.deploy
    if deploy is None or not is_python_step(model, ctx):
        return
    env = execution_env_path(model)
    if env:
        yield Finding(f"imports of '{model.name}' not judged: it runs in its own {EXECUTION_ENV_PATH} environment ('{env}'), "
                      "not the image's Python", severity=Severity.INFO, field="parameters")
        return
    for step in python_step_versions(model, ctx):
        problem = step.imports.problem
        if problem is None:
            yield from _step_import_findings(model, step, deploy, ctx)
        elif problem[3] != Severity.ERROR:  # parsed by no one (nested too deep): say so rather than pass
            yield Finding(f"imports of {model.name}/{step.folder.name}/{step.path.name} not judged: it is nested too deeply "
                          "for validate to parse (RB407 says more)",
                          path=step.path, version=step.number, severity=Severity.INFO)


def _distribution_problem(dist: Distribution, abi: Abi) -> tuple[str, str] | None:
    """(why, what: the tag or the file) when an installed wheel does not load in the image."""
    if dist.tags:
        problems = [(tag_problem(t, abi), t) for t in dist.tags]
        first, tag = problems[0]
        if first is not None and all(why is not None for why, _ in problems):
            return first, f"tag {tag}"
    for path in dist.extensions:
        why = extension_problem(path.rsplit("/", 1)[-1], abi)
        if why is not None:
            return why, path
    return None


def _folder_findings(model: ModelEntry, step: StepVersion, folder: PackageFolder, deploy: DeployTarget) -> Iterator[Finding]:
    abi = Abi(deploy.python, deploy.platform, deploy.image.glibc)
    where = f"{model.name}/{step.folder.name}" + (f"/{folder.folder}" if folder.folder else "")
    image = f"{deploy.image_name} runs Python {deploy.python} on {deploy.platform} with glibc {deploy.image.glibc}"
    recorded = {p.rsplit("/", 1)[-1] for d in folder.distributions for p in d.extensions}
    for dist in folder.distributions:
        found = _distribution_problem(dist, abi)
        if found is not None:
            why, what = found
            yield Finding(
                f"{dist.name} {dist.version} in {where} is {why} ({what}); {image}: the step fails to import it",
                path=step.folder.path / dist.folder, version=step.number,
                hint=f"reinstall it for the image: {_pip_hint(deploy, where, f'{dist.name}=={dist.version}')} "
                     f"(`repo-builder build ... --triton-release {deploy.release}` ships its steps' packages so)",
            )
    for name in folder.extensions:
        problem = extension_problem(name, abi)
        if problem is not None and name not in recorded:
            yield Finding(f"compiled module {where}/{name} is {problem}; {image}: importing it fails",
                          path=step.folder.path / folder.folder / name, version=step.number,
                          hint=f"rebuild it for CPython {deploy.python} on {deploy.platform} (manylinux), or install its wheel for the image")
    if folder.truncated:
        yield Finding(f"{where} holds more entries than validate lists; packages past the first were not judged",
                      path=step.folder.path / folder.folder, version=step.number, severity=Severity.INFO)


@rule("RB422", "python-package-incompatible", quiet="python_env_unjudged")
def check_python_package_incompatible(model: ModelEntry, ctx: RuleContext) -> Iterator[Finding]:
    """A package shipped with a Python step was built for another Python, CPU or C library than the image's.

    Wheels are built per Python version and platform: a ``*.dist-info/WHEEL`` records the tags it was
    built for (``Tag: cp312-cp312-manylinux_2_17_x86_64``), and a compiled module carries them in its name
    (``_imaging.cpython-312-x86_64-linux-gnu.so``). The image's Python imports only what fits it, as pip
    would install it: the same CPython version (``abi3`` wheels: that version or older; ``py3-none-any``:
    any), its CPU (``x86_64`` or ``aarch64``: ``--platform``), Linux with glibc (not macOS, Windows or
    musllinux) no newer than the image's (``manylinux_2_39`` at most for Ubuntu 24.04 images, 2.35 for
    22.04). A package installed with the builder's own pip (``pip install --target`` without
    ``--python-version``/``--platform``) carries the builder's Python: it fails at import with an
    ``ImportError`` or "undefined symbol". Judged for the package folders the step imports from (the
    version folder, and the subfolders ``model.py`` names); only with a target, as RB421.

    Fails (``--triton-release 24.12``, Python 3.12): ``1/site-packages/pillow-11.0.0.dist-info/WHEEL`` with
    ``Tag: cp310-cp310-manylinux_2_17_x86_64``; the same tagged ``..._aarch64`` for an x86_64 target.

    Passes: ``Tag: cp312-cp312-manylinux_2_17_x86_64``, or ``Tag: py3-none-any``; the cp310 wheel passes for
    ``--triton-release 24.05`` (Python 3.10).
    """
    deploy = ctx.options.deploy
    if deploy is None or not is_python_step(model, ctx) or execution_env_path(model):
        return
    for step in python_step_versions(model, ctx):
        for folder in step_packages(model, step.folder, step.imports).folders:
            yield from _folder_findings(model, step, folder, deploy)


_ENV_HINT = (f"ship the environment (conda-pack) inside the model folder and name it \"{MODEL_DIRECTORY}/python_env.tar.gz\", "
             "or build an image that holds it at a fixed path")


def _model_directory_path(value: str, model: ModelEntry) -> Finding | None:
    rest = value[len(MODEL_DIRECTORY):]
    relative = rest.lstrip("/")
    if (rest and not rest.startswith("/")) or not relative or not relative_inside(relative):
        return Finding(f"{EXECUTION_ENV_PATH} '{value}' leaves the model folder (the server replaces {MODEL_DIRECTORY} "
                       f"with the model's folder)", hint=_ENV_HINT)
    path = model.path / relative
    if regular_file_size(path, model.path) is not None:
        return None
    if path.is_dir() and resolves_inside(path, model.path):
        if regular_file_size(path / "bin" / "activate", model.path) is None:
            return Finding(f"{EXECUTION_ENV_PATH} '{value}' is a folder without bin/activate: the Python backend sources "
                           "that script to enter the environment", hint=_ENV_HINT)
        return None
    return Finding(f"{EXECUTION_ENV_PATH} '{value}' names {model.name}/{relative}, which is not a file or folder inside the "
                   "model folder; the stub fails to start", hint=_ENV_HINT)


@rule("RB423", "python-execution-env-path", field="parameters", sections=("parameters",))
def check_python_execution_env_path(model: ModelEntry, ctx: RuleContext) -> Iterator[Finding]:
    """A Python step's ``EXECUTION_ENV_PATH`` names an environment the server does not have.

    The Python backend (``python_be.cc``, ``pb_env.cc``, ``stub_launcher.cc``) takes the parameter as written:
    ``$$TRITON_MODEL_DIRECTORY`` at its start becomes the model's folder on the server (elsewhere in the
    value the replacement also eats the characters after it); anything else is resolved with ``realpath``
    on the server, a relative path from the server's working folder. A packed environment (conda-pack
    ``.tar.gz``) is unpacked, a folder is used as is and must hold ``bin/activate``; a path that does not
    exist stops the stub. A path into this machine's copy of the repository, its home or a virtual
    environment is the build machine's (no server has it); a path in the image's own folders is judged as
    RB608 judges op libraries (a warning where validate cannot see). This rule runs with or without a target.

    Fails: ``parameters { key: "EXECUTION_ENV_PATH" value { string_value: "/home/me/envs/pre.tar.gz" } }``,
    or ``"../shared/env.tar.gz"``.

    Passes: ``string_value: "$$TRITON_MODEL_DIRECTORY/python_env.tar.gz"`` with ``python_env.tar.gz`` in the
    model folder.
    """
    value = execution_env_path(model)
    if not value or not is_python_step(model, ctx):
        return
    if MODEL_DIRECTORY in value and not value.startswith(MODEL_DIRECTORY):
        yield Finding(f"{EXECUTION_ENV_PATH} '{value}': the Python backend replaces {MODEL_DIRECTORY} correctly only at the "
                      "start of the value", hint=_ENV_HINT)
    elif value.startswith(MODEL_DIRECTORY):
        found = _model_directory_path(value, model)
        if found is not None:
            yield found
    elif not value.startswith("/"):
        yield Finding(f"{EXECUTION_ENV_PATH} '{value}' is relative: the Python backend resolves it from the server's working "
                      "folder, not the model folder", hint=_ENV_HINT)
    else:
        options = ctx.options
        verdict = judge_server_path(value, model, ctx.repository.root, options.deploy, options.image_provides)
        if verdict is not None:
            yield Finding(f"{EXECUTION_ENV_PATH} '{value}' {verdict.reason}", hint=_ENV_HINT, severity=verdict.severity)


RULES: tuple[Rule, ...] = (check_python_import_missing, check_python_package_incompatible, check_python_execution_env_path)
