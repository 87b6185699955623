"""Nothing outside ``repo_builder/store/`` knows a storage scheme (issue 22 item 1): no ``"s3://"`` literal,
no scheme name compared, no URL regex, no ``"://"`` test of its own, no second ``is_remote``. Adding GCS or
Azure as a repository location then means editing ``store/`` only.

Docstrings and comments may name schemes (they tell the reader what a location looks like); every other
string that does is listed in ``ALLOWED`` with the reason.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from repo_builder.store.urls import SCHEMES

PACKAGE = Path(__file__).resolve().parents[2] / "repo_builder"
STORE = "store"
SCHEME_NAMES = frozenset({s.protocol for s in SCHEMES} | {s.triton for s in SCHEMES})
# A scheme in a string: "s3://", "gs://", "://" alone, "[A-Za-z]...:/" in a regex; http(s) is a server's
# own address (the embedded Triton's HTTP endpoint), not a repository location.
_SCHEME_TEXT = re.compile(r"(?<![A-Za-z])(?!https?:)[A-Za-z][A-Za-z0-9+.\-]*://|(?<![A-Za-z])://|[\]+*]:/")
# Helpers that decide "is this a URL / which store": only store/ defines them.
_HELPER_NAMES = frozenset({"is_remote", "is_url", "names_url", "parse_store_url", "split_url"})

HELP_TEXT = "help text shown to users: it names the URL forms a command takes"
# (file relative to repo_builder/, a part of the string) -> why that string may name a scheme.
ALLOWED: dict[tuple[str, str], str] = {
    ("redact.py", r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.\-]*://)(?P<userinfo>[^/\s@?#]+)@"):
        "redaction finds credentials in any URL-shaped text (a store client's own error messages too); it "
        "lies below store/, which uses it",
    ("redact.py", "://"): "redaction's quick test before its regexes (see above)",
    ("cli/validate.py", "For s3:// paths: largest ONNX file fetched to check its inputs and outputs."): HELP_TEXT,
    ("cli/options.py", "S3-compatible endpoint (MinIO ...) for s3:// URLs [default: $AWS_ENDPOINT_URL]."): HELP_TEXT,
    ("validate/remote.py", "so ``validate s3://`` and ``pull`` never write it"):
        "RB007's manual, a rule's docstring in all but form (docs/rules.md is generated from it)",
    ("validate/docs.py", "s3://"): "docs/rules.md's table note for the store codes (generated documentation)",
    ("validate/docs.py", "Object store checks (`validate s3://...`: what the store's publish record shows)"):
        "docs/rules.md's section title (generated documentation)",
}


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the string nodes that are docstrings (module, class, function)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                out.add(id(first.value))
    return out


def scheme_knowledge(root: Path = PACKAGE) -> Iterator[tuple[str, int, str]]:
    """(file, line, what) for every place outside ``root/store`` that knows a scheme."""
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root).as_posix()
        if relative.split("/")[0] == STORE:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = _docstrings(tree)
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in _HELPER_NAMES:
                yield relative, node.lineno, f"def {node.name}"
            if not (isinstance(node, ast.Constant) and isinstance(node.value, str)) or id(node) in docstrings:
                continue
            text = node.value
            if any(f == relative and part in text for f, part in ALLOWED):
                continue
            if text in SCHEME_NAMES or _SCHEME_TEXT.search(text):
                yield relative, node.lineno, repr(text)


def test_no_module_outside_store_knows_a_scheme() -> None:
    found = [f"{f}:{line} {what}" for f, line, what in scheme_knowledge()]
    assert found == [], "storage schemes outside repo_builder/store/ (use repo_builder.store.urls): " + "; ".join(found)


def test_every_allowed_string_still_occurs() -> None:
    """An allow-list entry whose string is gone is removed, so the list stays the truth."""
    missing = []
    for relative, text in ALLOWED:
        tree = ast.parse((PACKAGE / relative).read_text(encoding="utf-8"))
        if not any(isinstance(n, ast.Constant) and isinstance(n.value, str) and text in n.value for n in ast.walk(tree)):
            missing.append(f"{relative}: {text!r}")
    assert missing == []


@pytest.mark.parametrize(
    "source",
    [
        'def f(u):\n    return u.startswith("s3://")\n',
        'import re\nURL = re.compile(r"^s3://(?P<host>[^/]+)/")\n',
        'def f(loc):\n    return loc.protocol == "gs"\n',
        'def f(p):\n    return "://" in p\n',
        'import re\ndef f(p):\n    return re.match(r"^[A-Za-z][A-Za-z0-9+.-]+:/", p)\n',
        'def is_remote(p):\n    return False\n',
        'def f(b):\n    return f"as://{b}/models"\n',
    ],
)
def test_scheme_knowledge_is_found_when_a_module_outside_store_has_it(tmp_path: Path, source: str) -> None:
    (tmp_path / "validate").mkdir()
    (tmp_path / "validate" / "where.py").write_text(source)
    (tmp_path / "store").mkdir()
    (tmp_path / "store" / "urls.py").write_text('S3 = "s3://"\n')  # store/ itself may
    found = list(scheme_knowledge(tmp_path))
    assert found, source
    assert {f for f, _, _ in found} == {"validate/where.py"}


def test_scheme_knowledge_is_not_found_when_only_docstrings_and_server_addresses_name_it(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text(
        '"""Validate ``s3://bucket/prefix``."""\n\ndef url(host, port):\n    """A ``gs://`` note."""\n'
        '    return f"http://{host}:{port}/metrics"  # s3:// in a comment\n'
    )
    assert list(scheme_knowledge(tmp_path)) == []
