"""Every ``tensorrt`` attribute and method our code uses exists in NVIDIA's Python bindings, for each
TensorRT release we claim (10.0, 10.3 = Triton 24.08, 10.16, 11.1): not our own assumptions about the API.

The tables in tests/compile/data/ are recorded from NVIDIA/TensorRT's binding sources (python/src/infer/
pyCore.cpp, pyFoundationalTypes.cpp, pyGraph.cpp, parsers/pyOnnx.cpp) by ``scripts/trt-bindings GIT_DIR``;
this test walks the code's AST and follows what each variable holds (``builder = trt.Builder(...)``,
``network = builder.create_network(...)`` ...).
"""

from __future__ import annotations

import ast
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from repo_builder.compile.precision import OnnxFacts, choose_precision
from repo_builder.compile_recipe import PRECISIONS

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(__file__).parent / "data"
TABLES = {major_minor: DATA / f"tensorrt-bindings-{major_minor}.json" for major_minor in ("10.0", "10.3", "10.16", "11.1")}
CODE = (ROOT / "repo_builder" / "compile" / "tensorrt_api.py", ROOT / "repo_builder" / "plan_format.py")

# What a call returns, as binding class names (TensorRT's documented return types).
RETURNS = {
    "trt.Builder": "Builder",
    "trt.Runtime": "Runtime",
    "trt.OnnxParser": "OnnxParser",
    "trt.Logger": "Logger",
    "Builder.create_network": "INetworkDefinition",
    "Builder.create_builder_config": "IBuilderConfig",
    "Builder.create_optimization_profile": "IOptimizationProfile",
    "Builder.build_serialized_network": "IHostMemory",
    "IBuilderConfig.create_timing_cache": "ITimingCache",
    "IBuilderConfig.get_timing_cache": "ITimingCache",
    "OnnxParser.get_error": "ParserError",
    "Runtime.deserialize_cuda_engine": "ICudaEngine",
}
# Parameters typed ``Any`` in our code, by name.
PARAMETERS = {"engine": "ICudaEngine", "config": "IBuilderConfig", "builder": "Builder", "parser": "OnnxParser"}


def _table(major_minor: str) -> dict:
    return json.loads(TABLES[major_minor].read_text(encoding="utf-8"))


def _members(table: dict, name: str) -> set[str]:
    """A class's members including its bases', or an enum's values."""
    if name in table["enums"]:
        return set(table["enums"][name])
    found = set(table["classes"].get(name, ()))
    for base in table["bases"].get(name, ()):
        found |= _members(table, base)
    return found


def _kind(node: ast.expr, types: dict[str, str]) -> str | None:
    """The binding class an expression holds, when known: ``trt`` itself is the module."""
    if isinstance(node, ast.Name):
        return types.get(node.id)
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "trt":
        return f"trt.{node.attr}"
    if isinstance(node, ast.Call):
        func = node.func
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "trt":
            return RETURNS.get(f"trt.{func.attr}")
        if isinstance(func, ast.Attribute):
            owner = _kind(func.value, types)
            return RETURNS.get(f"{owner}.{func.attr}") if owner else None
    return None


def uses(source: str) -> Iterator[tuple[str, str, int]]:
    """(owner, member, line) for every attribute of a TensorRT object or of the ``trt`` module."""
    tree = ast.parse(source)
    for fn in ast.walk(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        types = {a.arg: PARAMETERS[a.arg] for a in fn.args.args if a.arg in PARAMETERS}
        assigned = [n for n in ast.walk(fn) if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name)]
        for node in sorted(assigned, key=lambda n: n.lineno):
            held = _kind(node.value, types)
            if held and not held.startswith("trt."):
                types[node.targets[0].id] = held
        for node in ast.walk(fn):
            if isinstance(node, ast.Attribute):
                if isinstance(node.value, ast.Name) and node.value.id == "trt":
                    yield "trt", node.attr, node.lineno
                    continue
                owner = _kind(node.value, types)
                if owner is not None:
                    yield owner.removeprefix("trt."), node.attr, node.lineno
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                owner = _kind(node.func.value, types)
                for kw in node.keywords if owner and not owner.startswith("trt.") else ():
                    yield f"{owner}.{node.func.attr}()", kw.arg or "**", node.lineno


def missing(table: dict, found: list[tuple[str, str, int]]) -> list[str]:
    module = set(table["classes"]) | set(table["enums"]) | set(table["module"])
    out = []
    for owner, member, line in found:
        if owner == "trt":
            ok = member in module
        elif owner.endswith("()"):
            ok = member in table["kwargs"].get(owner[:-2], ())
        else:
            ok = member in _members(table, owner)
        if not ok:
            out.append(f"line {line}: {owner}.{member}")
    return out


def _code_uses() -> list[tuple[str, str, int]]:
    return [u for path in CODE for u in uses(path.read_text(encoding="utf-8"))]


def test_uses_walker_finds_the_tensorrt_calls_when_reading_our_code():
    found = {f"{owner}.{member}" for owner, member, _ in _code_uses()}
    for expected in (
        "trt.Builder", "Builder.create_network", "IBuilderConfig.set_timing_cache", "IBuilderConfig.set_memory_pool_limit",
        "OnnxParser.parse_from_file", "ParserError.desc", "ICudaEngine.get_tensor_profile_shape", "Runtime.deserialize_cuda_engine",
        "IOptimizationProfile.set_shape", "ITimingCache.serialize", "IBuilderConfig.set_timing_cache().ignore_mismatch",
        "MemoryPoolType.WORKSPACE", "Logger.WARNING", "TensorIOMode.INPUT", "NetworkDefinitionCreationFlag.STRONGLY_TYPED",
    ):
        assert expected in found, expected
    assert len(found) >= 35


@pytest.mark.parametrize("major_minor", sorted(TABLES))
def test_every_tensorrt_attribute_we_use_exists_in_nvidias_bindings_when_each_supported_release(major_minor: str):
    assert missing(_table(major_minor), _code_uses()) == []


@pytest.mark.parametrize("major_minor", sorted(TABLES))
def test_precision_flags_exist_as_builder_flags_when_the_major_uses_them(major_minor: str):
    flags = set(_table(major_minor)["enums"]["BuilderFlag"])
    major = int(major_minor.split(".")[0])
    facts = OnnxFacts(frozenset({"FLOAT", "FLOAT16", "BFLOAT16"}), has_qdq=True)
    used = {f for p in PRECISIONS for f in choose_precision(p, major, facts).flags}
    assert used <= flags
    if major >= 11:
        assert used == set() and "FP16" not in flags  # 11 dropped the precision flags: none may be asked for


def test_missing_names_a_method_when_code_uses_one_the_bindings_lack():
    source = "def f(trt):\n    builder = trt.Builder(None)\n    builder.build_engine(None, None)\n    trt.Builder.max_batch_size\n"
    found = list(uses(source))
    assert sorted(missing(_table("10.3"), found)) == ["line 3: Builder.build_engine", "line 4: Builder.max_batch_size"]
