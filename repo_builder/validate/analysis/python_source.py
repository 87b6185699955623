"""A Python backend ``model.py`` read with ``ast``, never imported: does it load, can it auto-complete."""

from __future__ import annotations

import ast
from functools import lru_cache

from repo_builder.validate.analysis.python_compile import (
    PythonProblem as PythonProblem,  # re-exported: python_imports uses it
)
from repo_builder.validate.analysis.python_compile import compile_problem
from repo_builder.validate.records import Severity


def _nested_blocks(node: ast.stmt) -> list[list[ast.stmt]]:
    if isinstance(node, ast.With):
        return [node.body]
    if isinstance(node, ast.If | ast.For | ast.While):
        return [node.body, node.orelse]
    if isinstance(node, ast.Try):
        return [node.body, node.orelse, node.finalbody, *[h.body for h in node.handlers]]
    return []


def _bound_names(node: ast.stmt) -> tuple[set[str], bool]:
    """Names one top-level statement binds, and whether it is a star import."""
    if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
        return {node.name}, False
    if isinstance(node, ast.Import | ast.ImportFrom):
        names = {alias.asname or alias.name.split(".")[0] for alias in node.names}
        return names, any(alias.name == "*" for alias in node.names)
    if isinstance(node, ast.Assign):
        return {t.id for t in node.targets if isinstance(t, ast.Name)}, False
    if isinstance(node, ast.AnnAssign | ast.AugAssign) and isinstance(node.target, ast.Name):
        return {node.target.id}, False
    return set(), False


def top_level_names(body: list[ast.stmt]) -> tuple[set[str], dict[str, ast.ClassDef], bool]:
    """Names a module binds at top level (through if/try blocks too), its classes, and star imports."""
    names: set[str] = set()
    classes: dict[str, ast.ClassDef] = {}
    star = False
    for node in body:
        bound, is_star = _bound_names(node)
        names |= bound
        star |= is_star
        if isinstance(node, ast.ClassDef):
            classes[node.name] = node
        for block in _nested_blocks(node):
            n, c, s = top_level_names(block)
            names |= n
            classes.update(c)
            star |= s
    return names, classes, star


def check_python_source(source: bytes, filename: str) -> list[PythonProblem]:
    """Problems of a Python backend ``model.py`` read with ``ast`` (never imported)."""
    return list(_python_problems(source, filename))


@lru_cache(maxsize=512)
def _python_problems(source: bytes, filename: str) -> tuple[PythonProblem, ...]:
    # Generated repositories repeat the same model.py many times: parse each distinct text once.
    return tuple(_check_python_source(source, filename))


def parse_python(source: bytes, filename: str) -> ast.Module | PythonProblem:
    """The module's syntax tree (``ast``, never imported), or why there is none: the one parser of
    ``model.py`` files, so every rule says the same thing about a file it cannot read."""
    try:
        return ast.parse(source, filename=filename)
    except SyntaxError as exc:
        return (f"{filename} does not parse: {exc.msg}", exc.lineno, exc.offset, Severity.ERROR)
    except (ValueError, UnicodeDecodeError) as exc:  # null bytes, undecodable text
        return (f"{filename} is not Python source: {exc}", None, None, Severity.ERROR)
    except (RecursionError, MemoryError):  # one expression nested thousands deep: CPython's parser gives up
        # Would the stub's CPython compile it? Asked of compile() in a child under limits, never run.
        return compile_problem(source, filename)


def _check_python_source(source: bytes, filename: str) -> list[PythonProblem]:
    tree = parse_python(source, filename)
    if not isinstance(tree, ast.Module):
        return [tree]
    names, classes, star = top_level_names(tree.body)
    if "TritonPythonModel" not in names:
        if star:
            return []
        return [
            (
                f"{filename} defines no class 'TritonPythonModel'; the Python backend fails with "
                "AttributeError: module 'model' has no attribute 'TritonPythonModel'",
                None,
                None,
                Severity.ERROR,
            )
        ]
    cls = classes.get("TritonPythonModel")
    if cls is not None and not cls.bases:
        methods = {n.name for n in cls.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
        if "execute" not in methods:
            return [
                (
                    f"{filename}: class TritonPythonModel has no 'execute' method; every request will fail",
                    cls.lineno,
                    cls.col_offset + 1,
                    Severity.ERROR,  # the model loads but cannot answer: refused, as docs/rules.md says
                )
            ]
    return []


def _names_hook(node: ast.AST, name: str) -> bool:
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == name:
        return True
    if isinstance(node, ast.Name | ast.Attribute) and name in (getattr(node, "id", None), getattr(node, "attr", None)):
        return True
    return isinstance(node, ast.Constant) and node.value == name  # setattr(..., "auto_complete_config", ...)


@lru_cache(maxsize=512)
def python_defines_autocomplete(source: bytes) -> bool:
    """Whether the Python backend's stub can call ``TritonPythonModel.auto_complete_config`` (static or not).

    The stub calls it only when the class has it; without it the config stays as written (no inputs or
    outputs when there is no config). True whenever the source leaves room for doubt: it does not
    parse, the class has bases or decorators, is not a plain class statement, or the name
    ``auto_complete_config`` is bound or named anywhere else in the file.
    """
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, UnicodeDecodeError, RecursionError, MemoryError):
        return True  # RB407 refuses the file or says it was not analysed; no answer here
    _, classes, _ = top_level_names(tree.body)
    cls = classes.get("TritonPythonModel")
    if cls is None or cls.bases or cls.keywords or cls.decorator_list:
        return True
    return any(_names_hook(node, "auto_complete_config") for node in ast.walk(tree))
