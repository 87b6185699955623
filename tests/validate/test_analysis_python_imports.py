"""analysis/python_imports.py and stdlib_names.py: a step's imports read with ast (never run), classified as
the stub will meet them; the standard library of each image's Python from a committed table."""

from __future__ import annotations

import sys

import pytest

from repo_builder.validate.analysis.python_compile import NOT_COMPILED
from repo_builder.validate.analysis.python_imports import python_imports
from repo_builder.validate.analysis.stdlib_names import STDLIB_VERSIONS, stdlib_modules, table_version
from repo_builder.validate.records import Severity

SOURCE = b'''\
from __future__ import annotations
import os, sys
import PIL.Image as I
from . import helper, other
from .pkg.sub import x
try:
    import orjson
except ImportError:
    import simplejson
class TritonPythonModel:
    def initialize(self, args):
        import tokenizers
        __import__("cv2")
        sys.path.insert(0, os.path.join(os.path.dirname(__file__), "site-packages"))
'''


def test_python_imports_lists_top_level_modules_with_positions_when_parsed() -> None:
    found = python_imports(SOURCE)
    rows = [(m.name, m.line, m.column, m.required, m.level, m.member) for m in found.modules]
    assert rows == [
        ("__future__", 1, 1, True, 0, False), ("os", 2, 1, True, 0, False), ("sys", 2, 1, True, 0, False),
        ("PIL", 3, 1, True, 0, False), ("helper", 4, 1, True, 1, True), ("other", 4, 1, True, 1, True),
        ("pkg", 5, 1, True, 1, False), ("orjson", 7, 5, False, 0, False), ("simplejson", 9, 5, False, 0, False),
        ("tokenizers", 12, 9, True, 0, False), ("cv2", 13, 9, True, 0, False),
    ]
    assert found.names_folder("site-packages") and not found.names_folder("vendor")


def test_python_imports_names_folder_when_literal_is_a_path_component() -> None:
    found = python_imports(b'HERE = "x"\np = f"{HERE}/vendor/lib"\nq = "a\\\\deps"\n')
    assert found.names_folder("vendor") and found.names_folder("deps") and not found.names_folder("lib2")


def test_python_imports_reports_problem_when_source_does_not_parse() -> None:
    found = python_imports(b"import (\n")
    assert found.modules == () and found.problem is not None and "does not parse" in found.problem[0]


def test_python_imports_says_not_analysed_when_nested_too_deep() -> None:
    found = python_imports(b"x = " + b"-" * 100_000 + b"1\nimport PIL\n")  # CPython's parser gives up
    assert found.problem is not None and found.problem[3] == Severity.ERROR  # and so does its compiler
    assert found.problem[0] == NOT_COMPILED.format(filename="model.py", version=f"{sys.version_info[0]}.{sys.version_info[1]}", error="MemoryError")


def test_python_imports_walks_deep_blocks_when_they_parse() -> None:
    depth = 90  # below CPython's parser limit (~100 nested blocks), far beyond a recursive walk's comfort
    source = "".join("    " * i + "if x:\n" for i in range(depth)) + "    " * depth + "import PIL\n"
    assert [m.name for m in python_imports(source.encode()).modules] == ["PIL"]


def test_stdlib_modules_match_this_interpreter_when_same_version() -> None:
    here = f"{sys.version_info.major}.{sys.version_info.minor}"
    if here not in STDLIB_VERSIONS:
        pytest.skip(reason=f"the table has no row for {here}")
    assert stdlib_modules(here) == sys.stdlib_module_names


@pytest.mark.parametrize(("name", "present"), [
    ("tomllib", {"3.11", "3.12", "3.13"}), ("imp", {"3.10", "3.11"}), ("distutils", {"3.10", "3.11"}),
    ("asyncore", {"3.10", "3.11"}), ("cgi", {"3.10", "3.11", "3.12"}), ("telnetlib", {"3.10", "3.11", "3.12"}),
    ("binhex", {"3.10"}), ("json", {"3.10", "3.11", "3.12", "3.13"}),
])
def test_stdlib_modules_follow_whats_new_when_versions_differ(name: str, present: set[str]) -> None:
    assert {v for v in STDLIB_VERSIONS if name in stdlib_modules(v)} == present


def test_table_version_takes_nearest_older_row_when_python_unknown() -> None:
    assert table_version("3.14") == "3.13" and table_version("3.9") == "3.10" and table_version("3.12") == "3.12"
