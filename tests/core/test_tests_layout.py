"""The tests mirror the package: tests/<name>/ holds the tests of repo_builder/<name> (a subpackage, or a
top-level module such as api.py), so a module's tests are found by its path; helpers shared by several
folders live in tests/support/ only."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
PACKAGE = TESTS.parent / "repo_builder"

# Folders of tests/ that are not a name in repo_builder/, each with its reason.
EXCEPTIONS = {
    "core": "the tests of repo_builder's top-level modules (spec.py, dtypes.py, guarded_read.py, ...) and of the "
    "package as a whole (import graph, typecheck, README)",
    "support": "helpers and fixtures shared by several folders, imported as support.<module>",
    "scripts": "the tests of scripts/ (scripts/bench --quick runs, gpu-check)",
}


def package_names(package: Path) -> set[str]:
    """The subpackages and top-level modules of ``package``: the names a tests/ folder may have."""
    names = {p.name for p in package.iterdir() if p.is_dir() and (p / "__init__.py").is_file()}
    return names | {p.stem for p in package.glob("*.py") if not p.stem.startswith("_")}


def layout_problems(tests: Path, package: Path) -> list[str]:
    """One line per folder or file of ``tests`` that breaks the mirror rule."""
    allowed = package_names(package) | set(EXCEPTIONS)
    problems = []
    for folder in sorted(p for p in tests.iterdir() if p.is_dir() and not p.name.startswith((".", "__"))):
        if folder.name not in allowed:
            problems.append(f"tests/{folder.name}/ is not a repo_builder package or module name: move its tests to "
                            "the folder named after what they test")
        elif folder.name != "support":
            for helper in sorted(folder.glob("*.py")):
                if not helper.name.startswith("test_") and helper.name != "conftest.py":
                    problems.append(f"tests/{folder.name}/{helper.name} is a helper: shared helpers live in tests/support/")
    # A test module importing another one breaks when that one's private helper moves: helpers live in support/.
    for test in sorted(tests.glob("*/test_*.py")):
        for line in test.read_text(encoding="utf-8").splitlines():
            words = line.split()
            if len(words) >= 2 and words[0] in ("from", "import") and words[1].split(".")[0].startswith("test_"):
                problems.append(f"tests/{test.parent.name}/{test.name} imports the test module {words[1]}: move what "
                                "it shares to tests/support/")
    # No __init__.py in the test folders: pytest imports each test module by its file name, so two with one name clash.
    names = Counter(p.name for p in tests.glob("*/test_*.py"))
    problems += [f"{n} test files are named {name}: test file names must be unique across tests/"
                 for name, n in sorted(names.items()) if n > 1]
    return problems


def test_tests_folders_mirror_the_package() -> None:
    assert layout_problems(TESTS, PACKAGE) == []


def test_exceptions_are_not_package_names() -> None:
    # An exception that became a package name needs no reason any more (and would hide a mismatch).
    assert set(EXCEPTIONS).isdisjoint(package_names(PACKAGE))


def test_layout_problems_names_stray_folder_helper_and_clash(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "store").mkdir(parents=True)
    (package / "store" / "__init__.py").write_text("")
    (package / "spec.py").write_text("")
    tests = tmp_path / "tests"
    for name in ("store", "spec", "perf", "support"):
        (tests / name).mkdir(parents=True)
    (tests / "store" / "test_a.py").write_text("")
    (tests / "store" / "s3_helpers.py").write_text("")
    (tests / "store" / "conftest.py").write_text("")
    (tests / "spec" / "test_a.py").write_text("from test_b import helper\n")
    (tests / "support" / "s3_helpers.py").write_text("")
    assert layout_problems(tests, package) == [
        "tests/perf/ is not a repo_builder package or module name: move its tests to the folder named after what "
        "they test",
        "tests/store/s3_helpers.py is a helper: shared helpers live in tests/support/",
        "tests/spec/test_a.py imports the test module test_b: move what it shares to tests/support/",
        "2 test files are named test_a.py: test file names must be unique across tests/",
    ]
