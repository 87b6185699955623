"""The package's import graph (issue 9): no cycle, counting imports at any depth (inside functions too),
and no in-function import of the package's own modules except an explicit allow-list.

Imports inside functions are for heavy optional third-party packages only (torch, tensorrt, onnxruntime,
s3fs ...): an in-function import of a repo_builder module hides a cycle or a layering mistake, and the day
someone tidies it to the top of its file the package stops importing.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "repo_builder"

# (file relative to repo_builder/, imported module): in-function imports of the package's own modules that
# existed before issue 9's untangling and belong to other areas; each should move to the top of its file.
# Entries that no longer occur are harmless; new ones fail the test.
ALLOWED_IN_FUNCTION: frozenset[tuple[str, str]] = frozenset({
    ("cli/build.py", "repo_builder.compile"),
    ("cli/build.py", "repo_builder.compile.plan"),
    ("cli/serve.py", "repo_builder.triton.server"),
    ("cli/serve.py", "repo_builder.validate.live"),
    ("cli/serve.py", "repo_builder.validate.scan"),
    ("pipelines/assemble.py", "repo_builder.compile"),
    ("pipelines/assemble.py", "repo_builder.compile.pending"),
    ("pipelines/assemble.py", "repo_builder.render.environment"),
    ("pipelines/assemble.py", "repo_builder.repository.judge"),
    ("pipelines/assemble.py", "repo_builder.repository.manifest"),
    ("pipelines/assemble.py", "repo_builder.repository.stage"),
    ("pipelines/assemble.py", "repo_builder.repository.versions"),
    ("pipelines/assemble.py", "repo_builder.repository.writer"),
    ("pipelines/build_request.py", "repo_builder.compile"),  # moved here from cli/build.py
    ("pipelines/build_request.py", "repo_builder.compile.plan"),
    ("pipelines/runtime.py", "repo_builder.compile.trtexec"),
    ("pipelines/runtime.py", "repo_builder.gpu"),
    ("pipelines/runtime.py", "repo_builder.plan_format"),
    ("repository/verify_build.py", "repo_builder.validate.live"),
    ("triton/bench.py", "repo_builder.triton.client"),
    ("triton/client.py", "repo_builder.dtypes"),
    ("validate/conformance.py", "repo_builder.validate.engine"),
    ("validate/docs.py", "repo_builder.validate.live"),
    ("validate/docs.py", "repo_builder.validate.rules"),
})


def _modules(root: Path) -> dict[str, Path]:
    mods = {}
    for f in root.rglob("*.py"):
        parts = list(f.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        mods[".".join(parts)] = f
    return mods


def _resolve(name: str, mods: dict[str, Path]) -> str | None:
    while name and name not in mods:
        name = name.rpartition(".")[0]
    return name or None


def _targets(node: ast.AST, module: str, is_package: bool, mods: dict[str, Path]) -> list[str]:
    """Package modules an import statement loads (``from a import b`` counts ``a.b`` when b is a module)."""
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    elif isinstance(node, ast.ImportFrom):
        base = module if is_package else module.rpartition(".")[0]
        for _ in range(max(node.level - 1, 0)):
            base = base.rpartition(".")[0]
        source = (f"{base}.{node.module}" if node.module else base) if node.level else (node.module or "")
        subs = [f"{source}.{a.name}" for a in node.names if f"{source}.{a.name}" in mods]
        names = subs if len(subs) == len(node.names) else [source, *subs]
    else:
        return []
    found = [_resolve(n, mods) for n in names if n.split(".")[0] == PACKAGE.name]
    return [t for t in found if t and t != module]


def import_graph(root: Path = PACKAGE) -> dict[str, set[str]]:
    mods = _modules(root)
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for module, path in mods.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            graph[module].update(_targets(node, module, path.name == "__init__.py", mods))
    return graph


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    cycles.append(sorted(component))
    return cycles


def in_function_package_imports(root: Path = PACKAGE) -> Iterator[tuple[str, str, int]]:
    mods = _modules(root)
    for module, path in sorted(mods.items()):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                for target in _targets(node, module, path.name == "__init__.py", mods):
                    yield str(path.relative_to(root)), target, node.lineno


def test_import_graph_has_no_cycle_when_in_function_imports_count():
    cycles = find_cycles(import_graph())
    assert cycles == [], "import cycles: " + "; ".join(" <-> ".join(c) for c in cycles)


def test_import_graph_finds_a_cycle_when_two_modules_import_each_other(tmp_path: Path):
    pkg = tmp_path / "repo_builder"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from repo_builder import b\n")
    (pkg / "b.py").write_text("def f():\n    from repo_builder.a import x\n")
    assert find_cycles(import_graph(pkg)) == [["repo_builder.a", "repo_builder.b"]]


def test_package_modules_are_imported_at_top_level_when_not_in_allow_list():
    found = sorted({(f, t, line) for f, t, line in in_function_package_imports() if (f, t) not in ALLOWED_IN_FUNCTION})
    assert found == [], "in-function imports of repo_builder modules (move them to the top of the file): " + ", ".join(
        f"{f}:{line} {t}" for f, t, line in found
    )
