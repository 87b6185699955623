"""``store/`` lies low in the layering: it imports only shared ground (never validate, triton, repository),
and opening no store imports no store package (fsspec, s3fs, boto)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

STORE = Path(__file__).resolve().parents[2] / "repo_builder" / "store"
SHARED_GROUND = frozenset({"repo_builder.errors", "repo_builder.redact", "repo_builder.safe_paths", "repo_builder.triton_layout"})


def _package_imports(path: Path) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
    return {m for m in out if m.split(".")[0] == "repo_builder"}


def test_store_imports_only_shared_ground_when_it_imports_the_package() -> None:
    wrong = sorted(
        f"{path.name}: {module}"
        for path in STORE.glob("*.py")
        for module in _package_imports(path)
        if module not in SHARED_GROUND and not module.startswith("repo_builder.store")
    )
    assert wrong == []
    assert _package_imports(STORE / "urls.py") <= SHARED_GROUND  # the light module: no store package at all


def test_store_modules_import_no_store_client_when_no_store_is_opened() -> None:
    code = (
        "import sys\n"
        "import repo_builder.store.fsspec_store, repo_builder.store.for_triton, repo_builder.store.local\n"
        "print(sorted(m for m in ('fsspec', 's3fs', 'boto3', 'botocore', 'aiobotocore') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
