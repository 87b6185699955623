"""What a Python step's source imports, read with ``ast`` (never imported): each top-level module with its
line, and whether the step needs it to load or copes without it.

The Python backend's stub imports ``model.py`` as ``<version>.model`` (python_backend ``pb_stub.cc``
``StubSetup``) and then calls ``initialize`` and ``execute``, so an import anywhere in the file (module
level, class bodies, functions) runs, except where the code guards it:

- inside ``try:`` whose handlers catch ``ImportError``, ``ModuleNotFoundError``, ``Exception``,
  ``BaseException`` or everything, or in those handlers (the fallback), or under
  ``contextlib.suppress(ImportError)``: optional;
- under an ``if`` on ``sys.version_info``, ``sys.platform``, ``os.name`` or ``platform.*``: optional (the
  branch depends on the interpreter, not on the step);
- under ``if TYPE_CHECKING:`` or ``if __name__ == "__main__":``: never runs in the stub, not listed.

``importlib.import_module("x")`` and ``__import__("x")`` with a literal count as imports of ``x``. String
literals are kept too (bounded): a step names the folder it puts on ``sys.path`` with one.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from functools import lru_cache
from typing import cast

from repo_builder.validate.analysis.python_source import PythonProblem, parse_python

# Handlers that catch a failed import.
_IMPORT_ERRORS = frozenset({"ImportError", "ModuleNotFoundError", "Exception", "BaseException"})
# Conditions on the interpreter rather than on the step: either branch may be the one that runs.
_ENVIRONMENT_TESTS = (("sys", "version_info"), ("sys", "platform"), ("sys", "implementation"), ("os", "name"))
_DYNAMIC_IMPORTS = frozenset({"import_module", "__import__"})
# try/except, and try/except* on Python 3.11+ (the interpreter running validate may be 3.10).
_TRY_NODES: tuple[type[ast.stmt], ...] = tuple(getattr(ast, n) for n in ("Try", "TryStar") if hasattr(ast, n))
MAX_STRINGS = 10_000  # string literals kept per file (a step names its package folder in one of the first)
MAX_STRING_CHARS = 4096


@dataclass(frozen=True)
class ImportedModule:
    """One module a step imports. ``name`` is the top-level module (``PIL`` for ``from PIL import Image``);
    for a relative import (``level`` > 0) it is the first module below the step's package, or each
    name of ``from . import a, b`` on its own entry."""

    name: str
    line: int
    column: int  # 1-based
    required: bool  # False: guarded (try/except ImportError, an interpreter check)
    level: int = 0  # leading dots of a relative import
    statement: str = ""  # the import as written, shortened: "from PIL import Image"
    member: bool = False  # taken from its package by name (``from . import helper``), not imported by path


@dataclass(frozen=True)
class PythonImports:
    modules: tuple[ImportedModule, ...] = ()
    strings: frozenset[str] = frozenset()
    problem: PythonProblem | None = None  # the file does not parse: nothing listed (RB407 reports it)

    def names_folder(self, folder: str) -> bool:
        """Whether a string literal names ``folder``: equal to it, or one of its path components
        (``"site-packages"``, ``os.path.join(here, "site-packages")``, ``f"{here}/site-packages"``)."""
        return any(folder == s or folder in s.replace("\\", "/").split("/") for s in self.strings)


@dataclass(frozen=True)
class _Context:
    optional: bool = False


_REQUIRED = _Context()
_OPTIONAL = _Context(optional=True)


def _names(node: ast.expr | None) -> list[str]:
    """Exception class names an ``except`` clause lists (``builtins.ImportError`` counts as ImportError)."""
    if node is None:
        return ["BaseException"]  # a bare except catches everything
    if isinstance(node, ast.Tuple):
        return [n for elt in node.elts for n in _names(elt)]
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, ast.Attribute):
        return [node.attr]
    return []


def _catches_import_errors(node: ast.Try) -> bool:
    return any(_IMPORT_ERRORS.intersection(_names(h.type)) for h in node.handlers)


def _dotted(node: ast.expr) -> tuple[str, ...]:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return tuple(reversed(parts))
    return ()


def _if_kind(test: ast.expr) -> str:
    """``never`` (TYPE_CHECKING, __main__), ``environment`` (an interpreter check) or ``plain``."""
    if _dotted(test)[-1:] == ("TYPE_CHECKING",):
        return "never"
    if isinstance(test, ast.Compare) and any(
        isinstance(n, ast.Name) and n.id == "__name__" for n in (test.left, *test.comparators)
    ) and any(isinstance(n, ast.Constant) and n.value == "__main__" for n in (test.left, *test.comparators)):
        return "never"
    for node in ast.walk(test):
        dotted = _dotted(node) if isinstance(node, ast.Attribute) else ()
        if dotted[:2] in _ENVIRONMENT_TESTS or dotted[:1] == ("platform",):
            return "environment"
    return "plain"


def _suppresses_import_errors(node: ast.With | ast.AsyncWith) -> bool:
    for item in node.items:
        call = item.context_expr
        if (
            isinstance(call, ast.Call)
            and _dotted(call.func)[-1:] == ("suppress",)
            and any(_IMPORT_ERRORS.intersection(_names(a)) for a in call.args)
        ):
            return True
    return False


def _children(node: ast.AST, ctx: _Context) -> list[tuple[ast.AST, _Context]]:
    """The node's children with the context each runs in."""
    if isinstance(node, _TRY_NODES) and _catches_import_errors(cast(ast.Try, node)):  # TryStar has Try's fields
        node = cast(ast.Try, node)
        guarded = [*node.body, *(s for h in node.handlers for s in h.body)]
        rest = [*node.orelse, *node.finalbody, *(h.type for h in node.handlers if h.type is not None)]
        return [(c, _OPTIONAL) for c in guarded] + [(c, ctx) for c in rest]
    if isinstance(node, ast.If):
        kind = _if_kind(node.test)
        if kind == "never":
            return [(c, ctx) for c in node.orelse]
        branch = _OPTIONAL if kind == "environment" else ctx
        return [(node.test, ctx)] + [(c, branch) for c in (*node.body, *node.orelse)]
    if isinstance(node, ast.With | ast.AsyncWith) and _suppresses_import_errors(node):
        return [(c, _OPTIONAL) for c in node.body]
    return [(c, ctx) for c in ast.iter_child_nodes(node)]


def _statement(node: ast.Import | ast.ImportFrom) -> str:
    if isinstance(node, ast.Import):
        return "import " + ", ".join(a.name for a in node.names[:3])
    names = ", ".join(a.name for a in node.names[:3]) + (", ..." if len(node.names) > 3 else "")
    return f"from {'.' * node.level}{node.module or ''} import {names}"


def _from_import(node: ast.Import | ast.ImportFrom, required: bool) -> list[ImportedModule]:
    """One entry per top-level module the statement loads (``from . import a, b``: one per name)."""
    member = isinstance(node, ast.ImportFrom) and not node.module
    if isinstance(node, ast.Import):
        found = [(a.name.split(".")[0], 0) for a in node.names]
    elif node.module:
        found = [(node.module.split(".")[0], node.level)]
    else:  # from . import a, b: each name may be a module of the step's package
        found = [(a.name, node.level) for a in node.names if a.name != "*"]
    statement = _statement(node)
    return [ImportedModule(name, node.lineno, node.col_offset + 1, required, level, statement, member) for name, level in found]


def _dynamic_import(node: ast.Call, required: bool) -> ImportedModule | None:
    """``importlib.import_module("x")`` / ``__import__("x")`` with a literal name."""
    if _dotted(node.func)[-1:] not in {(n,) for n in _DYNAMIC_IMPORTS} or not node.args:
        return None
    first = node.args[0]
    if not isinstance(first, ast.Constant) or not isinstance(first.value, str) or not first.value.strip("."):
        return None
    name = first.value
    level = len(name) - len(name.lstrip("."))
    statement = f"{_dotted(node.func)[-1]}({name!r})"
    return ImportedModule(name.lstrip(".").split(".")[0], node.lineno, node.col_offset + 1, required, level, statement)


def scan_imports(tree: ast.Module) -> tuple[list[ImportedModule], set[str]]:
    """Imports and string literals of a parsed module, walked without recursion (a deeply nested file
    that parsed must not overflow the stack here)."""
    modules: list[ImportedModule] = []
    strings: set[str] = set()
    stack: list[tuple[ast.AST, _Context]] = [(tree, _REQUIRED)]
    while stack:
        node, ctx = stack.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            modules.extend(_from_import(node, not ctx.optional))
        elif isinstance(node, ast.Call):
            found = _dynamic_import(node, not ctx.optional)
            if found is not None:
                modules.append(found)
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and len(strings) < MAX_STRINGS
            and len(node.value) <= MAX_STRING_CHARS
        ):
            strings.add(node.value)
        stack.extend(reversed(_children(node, ctx)))
    modules.sort(key=lambda m: (m.line, m.column))
    return modules, strings


@lru_cache(maxsize=512)
def python_imports(source: bytes, filename: str = "model.py") -> PythonImports:
    """The imports of a step's source; generated repositories repeat one text many times: parsed once."""
    tree = parse_python(source, filename)
    if not isinstance(tree, ast.Module):
        return PythonImports(problem=tree)
    modules, strings = scan_imports(tree)
    return PythonImports(tuple(modules), frozenset(strings))
