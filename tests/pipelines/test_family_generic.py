"""A new family needs no edit outside its module, its templates and one registry line (issue 19).

The toy family in toy_family/ lives outside the package, with its own templates; a child process adds it
to the registry with the one line a real family adds, and `export`, `build` (offline validation included)
and the reference check then work for it as for the shipped families. A static check holds the generic
flow to knowing no family module.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

import repo_builder
from repo_builder.pipelines.registry import FAMILIES

TOY = Path(__file__).parent / "toy_family"
PACKAGE = Path(repo_builder.__file__).parent
# Run `repo-builder` with the toy family added by the same single line a real family adds to FAMILIES.
CHILD = """
import sys
sys.path.insert(0, {toy!r})
import toy_length
from repo_builder.pipelines import registry
registry.FAMILIES[toy_length.FAMILY.command] = toy_length.FAMILY  # the one registry line
from repo_builder.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


def _repo_builder(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(PACKAGE.parent)}
    return subprocess.run([sys.executable, "-c", CHILD.format(toy=str(TOY)), *args], capture_output=True, text=True,
                          timeout=600, env=env, check=False)


def _family_modules() -> set[str]:
    """The modules the registry's records point into (prepare, render, export, reference)."""
    modules = set()
    for record in FAMILIES.values():
        modules |= {record.prepare.__module__, record.render.__module__}
        if record.export is not None:
            modules.add(record.export.run.__module__)
        if record.reference is not None:
            modules.add(record.reference.check.__module__)
    return modules


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found |= {f"{node.module}.{alias.name}" for alias in node.names}
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
    return found


def test_generic_flow_imports_no_family_module_when_scanned() -> None:
    families = _family_modules()
    assert {"repo_builder.pipelines.image_classification", "repo_builder.pipelines.text_classification"} <= families
    # Shared helpers only families use (labels, top-k) count as family code too.
    family_code = families | {"repo_builder.pipelines.classification"}
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = "repo_builder." + ".".join(path.relative_to(PACKAGE).with_suffix("").parts)
        if module in family_code or module == "repo_builder.pipelines.registry":
            continue
        offenders += [f"{module} imports {name}" for name in _imports(path) & family_code]
    assert offenders == []


def test_new_family_builds_exports_and_passes_reference_when_added_by_one_registry_line(tmp_path: Path) -> None:
    helped = _repo_builder("build", "--help")
    assert helped.returncode == 0 and "toy-length" in helped.stdout, helped.stderr
    export = tmp_path / "export"
    exported = _repo_builder("export", "toy-length", "--out", str(export), "--factor", "3")
    assert exported.returncode == 0, exported.stderr
    assert '"factor": 3.0' in (export / "signature.json").read_text()

    repo = tmp_path / "repo"
    built = _repo_builder("build", "toy-length", "--from-export", str(export), "--out", str(repo), "--runtime", "onnxruntime",
                          "--templates", str(TOY / "templates"), "--format", "json", "-q")
    assert built.returncode == 0, built.stderr
    assert '"passes": true' in built.stdout or '"ok": true' in built.stdout, built.stdout
    assert (repo / "toy" / "1" / "README.md").read_text() == "toy\n"
    assert 'key: "TEXT_LEN"' in (repo / "toy" / "config.pbtxt").read_text()  # carried pre -> post

    # --labels means nothing to a family that does not declare it: refused, not ignored.
    refused = _repo_builder("build", "toy-length", "--out", str(tmp_path / "r2"), "--labels", str(export / "signature.json"),
                            "--templates", str(TOY / "templates"))
    assert refused.returncode == 2 and "--labels" in refused.stderr and "Traceback" not in refused.stderr

    sys.path.insert(0, str(TOY))
    try:
        import toy_length

        from repo_builder.pipelines import reference, registry

        registry.FAMILIES[toy_length.FAMILY.command] = toy_length.FAMILY
        checkpoint = tmp_path / "factor.txt"
        checkpoint.write_text("3")
        report = reference.check_reference(repo, model=checkpoint, minimum_cases=20)
    finally:
        registry.FAMILIES.pop("toy-length", None)
        sys.path.remove(str(TOY))
    assert report.passed and report.cases == 20, report
    assert report.figures["max_abs_diff"] == pytest.approx(0.0)
