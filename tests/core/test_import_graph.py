"""The package's import graph (issues 9, 22): no cycle, counting imports at any depth (inside functions
too), no in-function import of the package's own modules except an allow-list with reasons, and the
packages in the layer order of docs/architecture.md.

Imports inside functions are for heavy optional third-party packages only (torch, tensorrt, onnxruntime,
s3fs ...): an in-function import of a repo_builder module hides a cycle or a layering mistake, and the day
someone tidies it to the top of its file the package stops importing.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "repo_builder"

# (file relative to repo_builder/, imported module) -> why this import must wait for a call. Every other
# in-function import of the package's own modules fails the test, and so does an entry that no longer occurs.
ALLOWED_IN_FUNCTION: dict[tuple[str, str], str] = {
    ("cli/validate.py", "repo_builder.live.location"): "the live machinery (server launcher, gRPC client, numpy) "
    "only under --live: offline validate never imports it (tests/live/test_offline_imports.py)",
    ("api.py", "repo_builder.live.location"): "repo_builder.validate(..., live=True) only: an offline call "
    "imports no live module, as the CLI",
}

# The packages (and top-level modules) of repo_builder, top layer first: docs/architecture.md's table. A part
# imports only parts of lower layers; parts of one layer do not import each other, except in the shared
# ground, whose modules may import one another (the module-level cycle test above keeps them acyclic).
# ``<root>`` is repo_builder/__init__.py: it imports nothing of the package by statement (the API names
# resolve by string on first use), and modules import it for ``__version__``.
LAYERS: tuple[tuple[str, frozenset[str]], ...] = (
    ("entry: python -m", frozenset({"__main__"})),
    ("entry points", frozenset({"cli", "api"})),
    ("measuring", frozenset({"tune"})),
    ("build flow", frozenset({"pipelines"})),
    ("reduced precision, gated", frozenset({"precision"})),
    ("validate --live", frozenset({"live"})),
    ("running Triton, writing repositories", frozenset({"triton", "repository"})),
    ("validation", frozenset({"validate"})),
    ("stages", frozenset({"compile", "export", "render", "report"})),
    ("storage", frozenset({"store"})),
    (
        "shared ground",
        frozenset({
            "<root>", "compat", "compile_recipe", "dtypes", "environment", "errors", "fsutil", "gpu",
            "guarded_read", "nvcf", "paths", "plan_format", "redact", "safe_paths", "signals", "spec",
            "tensorrt_releases", "triton_layout", "triton_config", "onnx_io", "lazy_pb2", "triton_images", "deploy_target",
        }),
    ),
)
GROUND = LAYERS[-1][0]
# (importing part, imported part) -> why it goes against LAYERS. An entry that no longer occurs fails the test.
LAYER_EXCEPTIONS: dict[tuple[str, str], str] = {}


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


def test_in_function_allow_list_has_no_stale_entry_when_imports_move():
    used = {(f, t) for f, t, _ in in_function_package_imports()}
    stale = sorted(set(ALLOWED_IN_FUNCTION) - used)
    assert stale == [], f"ALLOWED_IN_FUNCTION entries that no longer occur (remove them): {stale}"
    assert all(reason.strip() for reason in ALLOWED_IN_FUNCTION.values())


def part(module: str) -> str:
    """The top-level part of ``repo_builder.x.y``: ``x`` (``<root>`` for the package itself)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "<root>"


def package_edges(graph: dict[str, set[str]]) -> dict[tuple[str, str], list[str]]:
    """(importing part, imported part) -> the module imports that make the edge (inside functions too)."""
    edges: dict[tuple[str, str], list[str]] = {}
    for module, targets in graph.items():
        for target in targets:
            if part(module) != part(target):
                edges.setdefault((part(module), part(target)), []).append(f"{module} -> {target}")
    return edges


def layer_problems(edges: dict[tuple[str, str], list[str]]) -> list[str]:
    layer = {name: i for i, (_, names) in enumerate(LAYERS) for name in names}
    problems = []
    for (src, dst), why in sorted(edges.items()):
        if (src, dst) in LAYER_EXCEPTIONS:
            continue
        if src not in layer or dst not in layer:
            problems.append(f"{src if src not in layer else dst}: not in LAYERS (add it to its layer)")
        elif layer[dst] < layer[src] or (layer[dst] == layer[src] and LAYERS[layer[src]][0] != GROUND):
            problems.append(f"{src} -> {dst} goes against the layers ({'; '.join(sorted(why)[:3])})")
    return sorted(set(problems))


def test_packages_import_only_lower_layers_when_listed_in_layers():
    problems = layer_problems(package_edges(import_graph()))
    assert problems == [], "\n".join(problems)


def test_packages_have_no_cycle_when_exceptions_are_set_aside():
    edges = [e for e in package_edges(import_graph()) if e not in LAYER_EXCEPTIONS]
    graph: dict[str, set[str]] = {}
    for src, dst in edges:
        graph.setdefault(src, set()).add(dst)
        graph.setdefault(dst, set())
    assert find_cycles(graph) == []


def test_layer_exceptions_have_no_stale_entry_when_imports_move():
    edges = package_edges(import_graph())
    stale = sorted(set(LAYER_EXCEPTIONS) - set(edges))
    assert stale == [], f"LAYER_EXCEPTIONS entries that no longer occur (remove them): {stale}"


def test_layers_name_each_part_once_when_listed():
    names = [name for _, names in LAYERS for name in names]
    assert len(names) == len(set(names))
    parts = {part(m) for m in import_graph()}
    assert parts == set(names), f"parts missing from LAYERS: {sorted(parts - set(names))}; unknown: {sorted(set(names) - parts)}"


def test_layer_check_finds_an_upward_import_when_a_stage_imports_validate():
    edges = {("render", "validate"): ["repo_builder.render.x -> repo_builder.validate.y"]}
    assert layer_problems(edges) == ["render -> validate goes against the layers (repo_builder.render.x -> repo_builder.validate.y)"]
    assert layer_problems({("triton", "repository"): ["a -> b"]})[0].startswith("triton -> repository")
    assert layer_problems({("fsutil", "errors"): ["a -> b"]}) == []
