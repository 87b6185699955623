"""analysis/wheel_tags.py: wheel tags and compiled-module names against the image's Python, CPU and glibc,
as pip's packaging.tags decides."""

from __future__ import annotations

import pytest

from repo_builder.validate.analysis.wheel_tags import Abi, extension_problem, is_extension, tag_problem

NOBLE = Abi("3.12", "x86_64", "2.39")
JAMMY_ARM = Abi("3.10", "aarch64", "2.35")


@pytest.mark.parametrize(("tag", "abi"), [
    ("py3-none-any", NOBLE), ("py2.py3-none-any", NOBLE), ("py39-none-any", NOBLE),
    ("cp312-cp312-manylinux_2_17_x86_64", NOBLE), ("cp312-cp312-manylinux2014_x86_64", NOBLE),
    ("cp312-cp312-manylinux1_x86_64", NOBLE), ("cp312-cp312-manylinux_2_39_x86_64", NOBLE),
    ("cp37-abi3-manylinux_2_28_x86_64", NOBLE), ("cp312-none-any", NOBLE), ("cp312-cp312-linux_x86_64", NOBLE),
    ("cp310-cp310-manylinux_2_35_aarch64", JAMMY_ARM), ("cp310-cp310-manylinux_2_17_x86_64.manylinux_2_17_aarch64", JAMMY_ARM),
])
def test_tag_problem_is_none_when_image_loads_wheel(tag: str, abi: Abi) -> None:
    assert tag_problem(tag, abi) is None


@pytest.mark.parametrize(("tag", "abi", "says"), [
    ("cp310-cp310-manylinux_2_17_x86_64", NOBLE, "built for CPython 3.10"),
    ("cp37-cp37m-manylinux1_x86_64", NOBLE, "built for CPython 3.7"),
    ("cp313-abi3-manylinux_2_17_x86_64", NOBLE, "needs Python 3.13 or newer"),
    ("py313-none-any", NOBLE, "needs Python 3.13 or newer"),
    ("cp311-none-any", NOBLE, "built for CPython 3.11"),
    ("cp312-cp312t-manylinux_2_17_x86_64", NOBLE, "ABI 'cp312t'"),
    ("cp312-cp312-manylinux_2_17_aarch64", NOBLE, "built for aarch64, not x86_64"),
    ("cp310-cp310-manylinux_2_39_aarch64", JAMMY_ARM, "needs glibc 2.39, the image has 2.35"),
    ("cp312-cp312-musllinux_1_2_x86_64", NOBLE, "musl"),
    ("cp312-cp312-macosx_14_0_arm64", NOBLE, "macOS"),
    ("cp312-cp312-win_amd64", NOBLE, "Windows"),
    ("pp310-pypy310_pp73-manylinux_2_17_x86_64", NOBLE, "another Python implementation"),
    ("py2-none-any", NOBLE, "Python 2"),
    ("cp312-cp312-manylinux_2_17_x86_64-extra", NOBLE, "not a wheel tag"),
])
def test_tag_problem_says_why_when_image_cannot_load_wheel(tag: str, abi: Abi, says: str) -> None:
    assert says in (tag_problem(tag, abi) or "")


@pytest.mark.parametrize(("name", "says"), [
    ("_imaging.cpython-312-x86_64-linux-gnu.so", None), ("_rust.abi3.so", None), ("plain.so", None),
    ("_imaging.cpython-311-x86_64-linux-gnu.so", "CPython 3.11"),
    ("_imaging.cpython-312-aarch64-linux-gnu.so", "aarch64, not x86_64"),
    ("_imaging.cpython-312-x86_64-linux-musl.so", "musl"),
    ("_imaging.cpython-312-darwin.so", "macOS"),
    ("_imaging.cp312-win_amd64.pyd", "Windows"),
    ("_imaging.pypy310-pp73-x86_64-linux-gnu.so", "PyPy"),
])
def test_extension_problem_reads_compiled_module_suffix_when_named(name: str, says: str | None) -> None:
    found = extension_problem(name, NOBLE)
    assert (found is None) if says is None else (says in (found or ""))


def test_is_extension_only_when_name_says_what_it_was_built_for() -> None:
    assert is_extension("a.cpython-312-x86_64-linux-gnu.so") and is_extension("a.pyd")
    assert not is_extension("a.abi3.so") and not is_extension("libz.so.1") and not is_extension("a.py")
