"""Self-contained Python steps: every package a generated step imports that the target image lacks ships
inside the step's version folder, built for the image's Python and platform.

The stock ``tritonserver:<release>-py3`` image's Python holds numpy<2, wheel, setuptools and virtualenv only
(``triton_images.py``). The version folder of a Python model is on the stub's ``sys.path``; the generated
``model.py`` also puts ``<version>/site-packages`` first on it, and that is where the packages go. They are
the versions this build verified against (the builder's own), installed by pip for the image's Python
(``--python-version``, ``--abi``, ``--platform`` up to the image's glibc), each once into a cache folder
and hard-linked from there into every repository that ships it.
"""

from __future__ import annotations

import ast
import hashlib
import json
import shutil
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from importlib import metadata
from pathlib import Path
from typing import Any

from repo_builder.deploy_target import TOO_LARGE_TO_SHIP, DeployTarget
from repo_builder.errors import ToolError, UserError
from repo_builder.render.rendered import RenderedModel
from repo_builder.triton.image_python import (
    MARKER,
    cache_root,
    cached_folder,
    no_release_fits,
    pip_target_arguments,
    run_tool,
)
from repo_builder.validate.analysis.image_modules import image_modules as judged_image_modules

SITE_PACKAGES = "site-packages"
# What a server gets instead of the builder's own distribution: the GUI build of OpenCV needs libGL, which
# the image lacks; the headless build of the same version has the same cv2.
SERVER_DISTRIBUTION = {"opencv-python": "opencv-python-headless", "opencv-contrib-python": "opencv-contrib-python-headless"}
# Declared dependencies the steps' imports never reach (the faithful --live proof loads every step without
# them): tokenizers uses huggingface-hub only in from_pretrained; onnxruntime imports with numpy alone.
UNUSED_DEPENDENCIES = {
    "tokenizers": frozenset({"huggingface-hub"}),
    "onnxruntime": frozenset({"coloredlogs", "flatbuffers", "packaging", "protobuf", "sympy"}),
}

Log = Callable[[str], None]


@dataclass(frozen=True)
class ShippedPackage:
    distribution: str  # as pip names it for the server ("opencv-python-headless")
    version: str
    modules: tuple[str, ...]  # the top-level modules a step imports from it

    @property
    def pin(self) -> str:
        return f"{self.distribution}=={self.version}"


def _canonical(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def image_modules(target: DeployTarget) -> frozenset[str]:
    """Top-level modules a step may import in the target image without shipping anything: what validate
    judges the image to provide (the standard library of the image's Python, its packages, the backend's)."""
    return judged_image_modules(target)


def imported_modules(source: str) -> tuple[str, ...]:
    """Top-level modules a generated step imports (absolute imports anywhere in the file)."""
    found: dict[str, None] = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                found.setdefault(alias.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.setdefault(node.module.split(".")[0])
    return tuple(found)


def _builder_distribution(module: str, owners: Mapping[str, list[str]]) -> str:
    names = owners.get(module)
    if not names:
        raise UserError(f"a generated step imports '{module}', which is not installed here: install it "
                        "(pip install 'repo-builder[export]') so build can ship the version it verified")
    return names[0]


def _requirements(distribution: str, target: DeployTarget) -> list[str]:
    """The distributions ``distribution`` declares it needs on the target (no extras), canonical names."""
    from packaging.requirements import Requirement  # build-side only

    environment = {"python_version": target.python, "python_full_version": f"{target.python}.0",
                   "sys_platform": "linux", "platform_system": "Linux", "platform_machine": target.platform,
                   "implementation_name": "cpython", "platform_python_implementation": "CPython", "os_name": "posix",
                   "extra": ""}
    needed = []
    for text in metadata.requires(distribution) or ():
        requirement = Requirement(text)
        if requirement.marker is None or requirement.marker.evaluate(environment):
            needed.append(_canonical(requirement.name))
    return needed


def _check_numpy(distribution: str, target: DeployTarget) -> None:
    """A shipped package must work with the image's numpy (1.x): its own numpy requirement must allow it."""
    from packaging.requirements import Requirement

    numpy = target.numpy_version
    for text in metadata.requires(distribution) or ():
        requirement = Requirement(text)
        if _canonical(requirement.name) == "numpy" and not requirement.specifier.contains(numpy, prereleases=True):
            environment = {"python_version": target.python, "extra": "", "platform_machine": target.platform,
                           "platform_system": "Linux", "sys_platform": "linux"}
            if requirement.marker is None or requirement.marker.evaluate(environment):
                raise UserError(f"{distribution} {metadata.version(distribution)} needs {requirement} but "
                                f"{target.image_name} has numpy {numpy}: install a release of {distribution} "
                                "that supports numpy 1.x in this environment and build again")


def packages_for(sources: Iterable[str], target: DeployTarget, *, shipping: bool = True) -> tuple[ShippedPackage, ...]:
    """What steps with these sources need on ``target``: their imports the image lacks, at the builder's
    versions; when ``shipping``, also the dependencies those declare (minus the image's and those never
    imported). Not shipping (the Dockerfile's pins), pip resolves the dependencies in the image itself."""
    provided = image_modules(target)
    image_distributions = {_canonical(d) for d, _ in target.image.packages} | {"pip"}
    owners = metadata.packages_distributions()
    wanted: dict[str, set[str]] = {}  # builder distribution -> modules imported from it
    for source in sources:
        for module in imported_modules(source):
            if module not in provided:
                wanted.setdefault(_builder_distribution(module, owners), set()).add(module)
    queue = list(wanted) if shipping else []
    while queue:
        distribution = queue.pop()
        key = _canonical(distribution)
        if key in TOO_LARGE_TO_SHIP:
            raise UserError(f"a generated step imports {distribution} ({TOO_LARGE_TO_SHIP[key]}), which build does not ship "
                            "into a repository: pass --step-packages dockerfile to build an image that has it")
        _check_numpy(distribution, target)
        for dependency in _requirements(distribution, target):
            skip = dependency in image_distributions or dependency in UNUSED_DEPENDENCIES.get(key, ())
            if skip or dependency in {_canonical(d) for d in wanted}:
                continue
            try:
                metadata.version(dependency)
            except metadata.PackageNotFoundError:
                continue  # not installed here, so the verified steps never imported it either
            wanted[dependency] = set()
            queue.append(dependency)
    shipped = []
    for distribution, modules in sorted(wanted.items(), key=lambda item: _canonical(item[0])):
        name = SERVER_DISTRIBUTION.get(_canonical(distribution), _canonical(distribution))
        shipped.append(ShippedPackage(name, metadata.version(distribution), tuple(sorted(modules))))
    return tuple(shipped)


def _installed_version(folder: Path, distribution: str) -> str | None:
    wanted = _canonical(distribution)
    for info in folder.glob("*.dist-info"):
        name, _, version = info.name[: -len(".dist-info")].rpartition("-")
        if _canonical(name) == wanted:
            return version
    return None


def installed_package(package: ShippedPackage, target: DeployTarget, log: Log) -> tuple[Path, ShippedPackage]:
    """The package unpacked for the target's Python and platform, from the cache (pip fills it once), and
    what it is. The builder's own version when it has a wheel for that Python; else the newest release
    before it that has one (a newer Pillow may have dropped the image's Python): said in the log, and
    proven by ``--live`` on that Python, not by this build."""
    key = f"cp{target.python.replace('.', '')}-{target.platform}-glibc{target.image.glibc}"
    folder = cache_root() / "step-packages" / key / f"{package.distribution}-{package.version}"
    if not (folder / MARKER).is_file():
        log(f"packages: fetching {package.pin} for Python {target.python} on {target.platform} (cached in {folder.parent})")

    def fetch(tmp: Path) -> str | None:
        arguments = [sys.executable, "-m", "pip", "install", "--quiet", "--no-input", "--disable-pip-version-check",
                     "--target", str(tmp), *pip_target_arguments(target.python, target.pip_platforms())]
        what = f"pip install {package.pin} for Python {target.python} on {target.platform}"
        failed = run_tool([*arguments, package.pin], what)
        if failed and no_release_fits(failed):
            failed = run_tool([*arguments, f"{package.distribution}<={package.version}"], what.replace("==", "<="))
        if failed:
            return failed
        shutil.rmtree(tmp / "bin", ignore_errors=True)  # console scripts: the stub never runs them
        (tmp / MARKER).write_text(json.dumps({"package": package.pin, "python": target.python,
                                              "platforms": list(target.pip_platforms())}) + "\n", encoding="utf-8")
        return None

    made = cached_folder(folder, fetch)
    if isinstance(made, str):
        raise ToolError(f"cannot ship {package.pin} for {target.image_name}: {made}")
    version = _installed_version(made, package.distribution) or package.version
    if version != package.version:
        log(f"packages: {package.distribution} {package.version} has no wheel for Python {target.python}; shipping {version}, "
            f"the newest before it that has one")
    return made, replace(package, version=version)


def _tree_files(folder: Path, prefix: str) -> dict[str, Path]:
    return {f"{prefix}/{path.relative_to(folder).as_posix()}": path for path in sorted(folder.rglob("*"))
            if path.is_file() and path.name != MARKER}


def ship_packages(rendered: Iterable[RenderedModel], target: DeployTarget, log: Log) -> tuple[tuple[RenderedModel, ...], dict[str, tuple[ShippedPackage, ...]]]:
    """Each Python step with the packages it needs added under ``site-packages/`` of its version folder;
    and, by model name, what was shipped (for the manifest and the build summary)."""
    models = tuple(rendered)
    out: list[RenderedModel] = []
    shipped: dict[str, tuple[ShippedPackage, ...]] = {}
    for model in models:
        sources = _python_sources(model)
        packages = packages_for(sources, target) if sources else ()
        if not packages:
            out.append(model)
            continue
        files = dict(model.files)
        actual = []
        for package in packages:
            folder, installed = installed_package(package, target, log)
            files.update(_tree_files(folder, SITE_PACKAGES))
            actual.append(installed)
        shipped[model.name] = tuple(actual)
        out.append(replace(model, files=files))
    return tuple(out), shipped


def dockerfile_text(target: DeployTarget, packages: Iterable[ShippedPackage | str]) -> str:
    """A Dockerfile for an image that has every package the steps import (``--step-packages dockerfile``);
    ``packages`` as records or as pins (``pillow==13.0.0``)."""
    pins = sorted({p if isinstance(p, str) else p.pin for p in packages})
    lines = [
        f"# Generated by repo-builder for {target.describe()}.",
        "# The repository's Python steps import these packages, which the stock image's Python lacks.",
        f"FROM {target.image_name}",
    ]
    if pins:
        # Ubuntu 24.04's Python is marked externally managed (PEP 668); the image's own build installs the same way.
        lines.append("ENV PIP_BREAK_SYSTEM_PACKAGES=1")
        lines.append("RUN pip3 install --no-cache-dir " + " ".join(pins))
    return "\n".join(lines) + "\n"


def digest(packages: Iterable[ShippedPackage]) -> str:
    return hashlib.sha256("\n".join(sorted(p.pin for p in packages)).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class PackagePlan:
    """What a build did so the target image can import every step: packages shipped per model, or (with
    ``--step-packages dockerfile``) the packages an image built from the written Dockerfile must have."""

    shipped: Mapping[str, tuple[ShippedPackage, ...]]
    image: tuple[ShippedPackage, ...] = ()


def _python_sources(model: RenderedModel) -> list[str]:
    """The Python files directly in a Python-backend model's version folder (what the stub imports)."""
    if 'backend: "python"' not in model.config_text:
        return []  # ensembles, ONNX Runtime, TensorRT and DALI models run no step Python
    return [content.decode("utf-8") for rel, content in model.files.items()
            if rel.endswith(".py") and "/" not in rel and isinstance(content, bytes)]


def provide_packages(rendered: Iterable[RenderedModel], target: DeployTarget, log: Log) -> tuple[tuple[RenderedModel, ...], PackagePlan]:
    """Ship each Python step's packages into its version folder, or list them for the Dockerfile."""
    models = tuple(rendered)
    if target.step_packages == "dockerfile":
        needed = packages_for([s for m in models for s in _python_sources(m)], target, shipping=False)
        if any("onnxruntime_extensions/" in m.config_text for m in models):  # --preprocess onnx's op library
            needed += (ShippedPackage("onnxruntime-extensions", metadata.version("onnxruntime_extensions"), ("onnxruntime_extensions",)),)
        return models, PackagePlan({}, needed)
    out, shipped = ship_packages(models, target, log)
    for name, packages in shipped.items():
        log(f"packages: {name} ships {', '.join(p.pin for p in packages)} for Python {target.python} ({target.platform})")
    return out, PackagePlan(shipped)


def merge_target(old: object, new: dict[str, Any]) -> dict[str, Any]:
    """``new`` with what an earlier build recorded for the same image (release, platform, step packages):
    the modules its Dockerfile must install and what each model ships. Another image: ``new`` alone."""
    keys = ("release", "platform", "step_packages")
    if not isinstance(old, dict) or any(old.get(k) != new[k] for k in keys):
        return new
    merged = dict(new)
    provides = old.get("image_provides")
    if isinstance(provides, dict):
        merged["image_provides"] = {**{str(k): str(v) for k, v in provides.items()}, **new["image_provides"]}
    shipped = old.get("shipped")
    if isinstance(shipped, dict):
        merged["shipped"] = dict(sorted({**shipped, **new["shipped"]}.items()))
    if merged["image_provides"] and merged.get("dockerfile") is None:
        merged["dockerfile"] = old.get("dockerfile")
    return merged


def target_record(target: DeployTarget, plan: PackagePlan, dockerfile: str | None) -> dict[str, Any]:
    """The manifest's ``target``: what the repository was built for; validate judges against it by default."""
    return {
        "release": target.release,
        "image": target.image_name,
        "python": target.python,
        "gpu": target.gpu,
        "platform": target.platform,
        "step_packages": target.step_packages,
        "dockerfile": dockerfile,
        "image_provides": {module: p.pin for p in plan.image for module in p.modules},
        "shipped": {name: [p.pin for p in packages] for name, packages in sorted(plan.shipped.items())},
    }
