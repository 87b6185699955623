"""`repo-builder report RESULT.json... -o page.html`: overlays, labels, and one-line refusals that write nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.report_factory import bench_doc, level, tune_doc, write

from repo_builder.cli.main import main


def one_line_error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


def test_report_overlays_two_runs_when_given_two_files(tmp_path: Path) -> None:
    after = bench_doc([{"model": "pipeline", "levels": [level(1, 150.0, 9.0, steps=("pre", "net"))]}])
    a, b = write(tmp_path / "a.json", bench_doc()), write(tmp_path / "b.json", after)
    out = tmp_path / "cmp.html"
    assert main(["report", str(a), str(b), "-o", str(out), "--label", "before", "--label", "after"]) == 0
    html = out.read_text()
    assert 'id="chart-1" data-series="2"' in html and "before: pipeline" in html and "after: pipeline" in html


def test_report_labels_runs_by_file_name_when_no_label_given(tmp_path: Path) -> None:
    (tmp_path / "x").mkdir()
    (tmp_path / "y").mkdir()
    a, b = write(tmp_path / "x" / "bench.json", bench_doc()), write(tmp_path / "y" / "bench.json", bench_doc())
    out = tmp_path / "r.html"
    assert main(["report", str(a), str(b), str(write(tmp_path / "tune.json", tune_doc())), "-o", str(out)]) == 0
    html = out.read_text()
    assert f"{a}: pipeline" in html and f"{b}: pipeline" in html  # same names: told apart by their paths
    assert "Tune search: tune.json" in html


def test_report_writes_nothing_and_names_file_and_key_when_second_file_is_bad(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = write(tmp_path / "good.json", bench_doc())
    bad = write(tmp_path / "bad.json", {**bench_doc(), "schema_version": 7})
    out = tmp_path / "page.html"
    assert main(["report", str(good), str(bad), "-o", str(out)]) == 2
    err = one_line_error(capsys)
    assert str(bad) in err and "'schema_version'" in err
    assert not out.exists()
    out.write_text("the previous page")
    assert main(["report", str(good), str(bad), "-o", str(out)]) == 2
    assert out.read_text() == "the previous page"  # untouched, and no temporary file left beside it
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.json", "good.json", "page.html"]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--label", "a", "--label", "b"], "2 labels for 1"),
        (["-o", "{tmp}/missing/page.html"], "does not exist"),
        (["-o", "{tmp}"], "is a folder"),
        (["-o", "{tmp}/a.json"], "one of the result files"),
        (["-o", "{tmp}/loop"], "is a symbolic link that never reaches a file"),  # found by the CLI fuzz test
    ],
)
def test_report_refuses_in_one_line_when_options_are_bad(tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], says: str) -> None:
    a = write(tmp_path / "a.json", bench_doc())
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    args = [arg.replace("{tmp}", str(tmp_path)) for arg in args]
    out = ["-o", str(tmp_path / "page.html")] if "-o" not in args else []
    assert main(["report", str(a), *out, *args]) == 2
    assert says in one_line_error(capsys)
    assert json.loads(a.read_text())["kind"] == "repo-builder.bench"


def test_report_refuses_when_file_is_validate_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    other = write(tmp_path / "validate.json", {"version": 1, "tool": "repo-builder", "summary": {}})
    assert main(["report", str(other), "-o", str(tmp_path / "p.html")]) == 2
    err = one_line_error(capsys)
    assert err.startswith(f"error: {other}: key 'kind' is missing")


def test_report_refuses_when_budget_is_not_positive(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = write(tmp_path / "a.json", bench_doc())
    assert main(["report", str(a), "-o", str(tmp_path / "p.html"), "--p99-ms", "0"]) == 2  # click's usage error
    assert "--p99-ms" in capsys.readouterr().err and not (tmp_path / "p.html").exists()


def test_report_names_the_extra_and_writes_nothing_when_matplotlib_is_missing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as on the light install: importing it fails
    a = write(tmp_path / "a.json", bench_doc())
    assert main(["report", str(a), "-o", str(tmp_path / "p.html")]) == 3
    assert "repo-builder[report]" in one_line_error(capsys)
    assert not (tmp_path / "p.html").exists()
