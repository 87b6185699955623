"""A ``model.py`` CPython cannot compile is an error (issue 38 item 4): compiled, never run, in a child
process with memory and time limits, and the compiler's own error reported; a file only too deep for
validate's parser, which CPython compiles, stays a warning (its checks skipped, not passed)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from support.validate_repo_helpers import ADD_SUB_MODEL_PY, make_add_sub, validate

from repo_builder.validate.analysis import python_compile, python_source
from repo_builder.validate.records import Severity

DEEP_SUM = "\nX = " + "+".join(["1"] * 30_000) + "\n"  # RecursionError while compiling
DEEP_UNARY = "\nX = " + "-" * 100_000 + "1\n"  # MemoryError: CPython's parser gives up


def _rb407(repo: Path) -> list[tuple[Severity, str]]:
    return [(d.severity, d.message) for d in validate(repo).diagnostics if d.code == "RB407"]


@pytest.mark.parametrize(("tail", "error"), [(DEEP_SUM, "RecursionError: maximum recursion depth exceeded during compilation"),
                                             (DEEP_UNARY, "MemoryError")])
def test_model_py_refused_with_compiler_error_when_cpython_cannot_compile_it(repo: Path, tail: str, error: str) -> None:
    model = make_add_sub(repo)
    (model / "1" / "model.py").write_text(ADD_SUB_MODEL_PY + tail)
    [(severity, message)] = _rb407(repo)
    assert severity == Severity.ERROR
    assert f"fails with {error};" in message and "cannot import it" in message


def test_model_py_stays_a_skipped_warning_when_only_validates_parser_gives_up(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = make_add_sub(repo)
    (model / "1" / "model.py").write_text(ADD_SUB_MODEL_PY + "\n# a distinct text for the caches\n")

    def too_deep(*args: object, **kwargs: object) -> ast.Module:
        raise RecursionError("maximum recursion depth exceeded during ast construction")

    monkeypatch.setattr(python_source.ast, "parse", too_deep)  # the analysis here fails; the child's compile() does not
    [(severity, message)] = _rb407(repo)
    assert severity == Severity.WARNING
    assert "skipped, not passed, although CPython" in message and "compiles it" in message


def test_compile_never_runs_the_file_when_it_compiles(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    source = f"open({str(marker)!r}, 'w').write('x')\n".encode()
    problem = python_compile.compile_problem(source, "model.py")
    assert problem[3] == Severity.WARNING and "compiles it" in problem[0]
    assert not marker.exists()


def test_compile_limits_memory_when_the_file_needs_more(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(python_compile, "COMPILE_MEMORY_BYTES", 200 << 20)
    source = b"x = 1\n" * 1_000_000  # ~1.4 GB to compile: over the limit, so undecided, not an error
    problem = python_compile.compile_problem.__wrapped__(source, "model.py")
    assert problem[3] == Severity.WARNING and "needs more than 200 MiB" in problem[0]


def test_compile_limits_time_when_the_child_runs_long(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(python_compile, "COMPILE_SECONDS", 1)
    monkeypatch.setattr(python_compile, "_CHILD", "import time\ntime.sleep(30)\n")
    problem = python_compile.compile_problem.__wrapped__(b"x = 1\n", "model.py")
    assert problem[3] == Severity.WARNING and "took over 1 s" in problem[0]
