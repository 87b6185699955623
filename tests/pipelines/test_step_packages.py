"""What build ships with the Python steps for a target image, and what it refuses (pipelines/step_packages.py)."""

from __future__ import annotations

from importlib import metadata
from pathlib import Path

import pytest

from repo_builder.deploy_target import resolve_target
from repo_builder.errors import UserError
from repo_builder.pipelines.step_packages import (
    SITE_PACKAGES,
    ShippedPackage,
    dockerfile_text,
    image_modules,
    imported_modules,
    installed_package,
    packages_for,
    ship_packages,
)
from repo_builder.render.environment import make_environment
from repo_builder.render.rendered import RenderedModel

TARGET = resolve_target("24.12")
PYTHON_CONFIG = 'name: "pre"\nbackend: "python"\nmax_batch_size: 8\n'


def _pins(sources: list[str], target: object = TARGET) -> dict[str, str]:
    return {p.distribution: p.version for p in packages_for(sources, target)}  # type: ignore[arg-type]


def test_imported_modules_lists_top_level_names_when_imports_are_nested() -> None:
    source = "import os.path\nfrom PIL import Image\ndef f():\n    import cv2\ntry:\n    import torch\nexcept ImportError:\n    pass\n"
    assert imported_modules(source) == ("os", "PIL", "cv2", "torch")


def test_packages_for_ships_only_what_the_image_lacks_when_steps_import_numpy_and_pillow() -> None:
    pins = _pins(["import json, os\nimport numpy as np\nimport triton_python_backend_utils as pb\nfrom PIL import Image\n"])
    assert pins == {"pillow": metadata.version("pillow")}


def test_packages_for_leaves_out_dependencies_never_imported_when_tokenizers_is_shipped() -> None:
    pins = _pins(["from tokenizers import Tokenizer\n"])
    assert pins == {"tokenizers": metadata.version("tokenizers")}  # no huggingface-hub and its tree


def test_packages_for_ships_the_headless_opencv_when_the_builder_has_the_gui_build() -> None:
    pins = _pins(["import cv2\n"])
    owners = metadata.packages_distributions()["cv2"]
    assert list(pins) == ["opencv-python-headless"]
    assert pins["opencv-python-headless"] == metadata.version(owners[0])


def test_packages_for_refuses_torch_naming_the_dockerfile_when_shipping() -> None:
    with pytest.raises(UserError, match="--step-packages dockerfile"):
        packages_for(["import torch\n"], TARGET)


def test_image_modules_hold_the_frontend_packages_when_the_release_installs_them() -> None:
    newer, older = image_modules(resolve_target("24.12")), image_modules(resolve_target("24.05"))
    assert {"numpy", "json", "triton_python_backend_utils"} <= older
    assert "fastapi" in newer and "fastapi" not in older
    assert not {"PIL", "cv2", "tokenizers", "onnxruntime"} & newer


def test_dockerfile_pins_each_package_over_the_stock_image_when_written() -> None:
    text = dockerfile_text(TARGET, [ShippedPackage("pillow", "13.0.0", ("PIL",)), ShippedPackage("tokenizers", "0.23.3", ("tokenizers",))])
    assert "FROM nvcr.io/nvidia/tritonserver:24.12-py3\n" in text
    assert "RUN pip3 install --no-cache-dir pillow==13.0.0 tokenizers==0.23.3\n" in text
    assert "PIP_BREAK_SYSTEM_PACKAGES=1" in text  # Ubuntu 24.04's Python is externally managed


def test_ship_packages_adds_site_packages_for_python_steps_only_when_rendered() -> None:
    step = RenderedModel("pre", "preprocess", 1, PYTHON_CONFIG, {"model.py": b"from PIL import Image\n"})
    ensemble = RenderedModel("ens", "ensemble", 1, 'name: "ens"\nplatform: "ensemble"\n', {})
    models, shipped = ship_packages([step, ensemble], TARGET, log=lambda _: None)
    files = dict(models[0].files)
    assert f"{SITE_PACKAGES}/PIL/__init__.py" in files and isinstance(files[f"{SITE_PACKAGES}/PIL/__init__.py"], Path)
    wheel_tags = [p for rel, p in files.items() if rel.endswith(".dist-info/WHEEL")]
    assert wheel_tags and "cp312" in Path(str(wheel_tags[0])).read_text(encoding="utf-8")
    assert models[1] == ensemble and list(shipped) == ["pre"]


def test_installed_package_falls_back_to_an_older_release_when_the_image_python_has_no_wheel() -> None:
    # Pillow 13 dropped Python 3.10 (the 24.05 image's): the newest release before it that has a wheel ships.
    target = resolve_target("24.05")
    wanted = ShippedPackage("pillow", metadata.version("pillow"), ("PIL",))
    notes: list[str] = []
    folder, shipped = installed_package(wanted, target, notes.append)
    assert (folder / "PIL" / "__init__.py").is_file()
    tags = next(folder.glob("pillow-*.dist-info")).joinpath("WHEEL").read_text(encoding="utf-8")
    assert "cp310" in tags
    if shipped.version != wanted.version:
        assert any("has no wheel for Python 3.10" in n for n in notes)


def test_site_packages_line_names_the_target_python_when_rendered_for_a_target() -> None:
    env = make_environment()
    assert "== None" in env.get_template("model/_site_packages.py.j2").render()  # nothing shipped: never inserted
    env.globals["ship_python"] = "3.12"
    text = env.get_template("model/_site_packages.py.j2").render()
    assert "== '3.12'" in text and '"site-packages"' in text


def test_installed_package_is_built_for_aarch64_when_the_target_platform_is_aarch64() -> None:
    target = resolve_target("24.12", platform="aarch64")
    folder, _ = installed_package(ShippedPackage("pillow", metadata.version("pillow"), ("PIL",)), target, lambda _: None)
    tags = next(folder.glob("pillow-*.dist-info")).joinpath("WHEEL").read_text(encoding="utf-8")
    assert "aarch64" in tags and "x86_64" not in tags
    assert list(folder.rglob("*.cpython-312-aarch64-linux-gnu.so")), "compiled modules for the image's Python on aarch64"


def test_merge_target_keeps_earlier_builds_needs_when_the_image_is_the_same() -> None:
    from repo_builder.pipelines.step_packages import PackagePlan, merge_target, target_record

    dockerfile = resolve_target("24.12", step_packages="dockerfile")
    first = target_record(dockerfile, PackagePlan({}, (ShippedPackage("torch", "2.14.1", ("torch",)),)), "Dockerfile")
    second = target_record(dockerfile, PackagePlan({}, (ShippedPackage("tokenizers", "0.23.3", ("tokenizers",)),)), "Dockerfile")
    merged = merge_target(first, second)
    assert merged["image_provides"] == {"torch": "torch==2.14.1", "tokenizers": "tokenizers==0.23.3"}
    other = target_record(resolve_target("24.05", step_packages="dockerfile"), PackagePlan({}, ()), None)
    assert merge_target(first, other) == other  # another image: the new build's needs alone
