"""mypy over the package stays at zero errors (issue 22): base level everywhere, mypy's strict flags on
``repo_builder.validate.*``, ``repo_builder.tune.*`` and ``repo_builder.pipelines.*``. Runs ``scripts/typecheck`` (the ModelConfig stubs, then mypy) with the
interpreter running the tests, so the venv's mypy and mypy-protobuf are the ones used."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import tomllib

ROOT = Path(__file__).resolve().parents[2]
TYPECHECK = ROOT / "scripts" / "typecheck"
STRICT_FLAGS = (
    "disallow_any_generics",
    "disallow_subclassing_any",
    "disallow_untyped_calls",
    "disallow_untyped_defs",
    "disallow_incomplete_defs",
    "disallow_untyped_decorators",
    "warn_return_any",
    "no_implicit_reexport",
    "strict_equality",
    "extra_checks",
)


def _typecheck(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(TYPECHECK), *args],
        env={**os.environ, "PYTHON": sys.executable},
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )


@pytest.mark.slow
def test_typecheck_reports_zero_errors_when_run_on_the_package() -> None:
    done = _typecheck()
    errors = [line for line in done.stdout.splitlines() if ": error:" in line]
    assert done.returncode == 0 and not errors, "mypy found errors:\n" + (done.stdout + done.stderr)[-6000:]
    assert "Success: no issues found" in done.stdout


@pytest.mark.slow
def test_typecheck_fails_when_a_file_has_a_type_error(tmp_path: Path) -> None:
    # The harness itself: an error must come out as a failure, not be lost on the way.
    bad = tmp_path / "bad.py"
    bad.write_text('count: int = "three"\n', encoding="utf-8")
    # Its own cache: mypy's shared one would replay a same-named module's errors with an older path.
    done = _typecheck("--cache-dir", str(tmp_path / "cache"), str(bad))
    assert done.returncode == 1
    assert f"{bad}:1: error: Incompatible types in assignment" in done.stdout


@pytest.mark.parametrize("module", ["repo_builder.validate.*", "repo_builder.tune.*", "repo_builder.pipelines.*"])
def test_mypy_config_is_strict_when_module_is_validate_tune_or_pipelines(module: str) -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["mypy"]
    overrides = [o for o in config.get("overrides", []) if module in o.get("module", [])]
    assert overrides, f"no [[tool.mypy.overrides]] for {module}"
    missing = [flag for flag in STRICT_FLAGS if not any(o.get(flag) is True for o in overrides)]
    assert not missing, f"{module} is not strict: {missing} not set"
    assert config.get("check_untyped_defs") is True and config.get("warn_unused_ignores") is True
