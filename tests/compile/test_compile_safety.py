"""compile-pending refuses before writing: recipe names that leave the version folder (issue 10.1),
precision the machine's TensorRT major refuses (issue 13.8), TensorRT below 10 (13.5), a serving release
whose TensorRT differs; and a timing cache from another device is reported (13.8)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.trt_fixtures import IMAGE_SIGNATURE, TENSORRT_CONFIG, make_image_onnx, tree_digest

from repo_builder.cli.main import main
from repo_builder.compile import CompileSettings, defer_plan, find_recipes
from repo_builder.compile.pending import _precheck
from repo_builder.compile.plan import BuildEnvironment, check_tensorrt_major, require_buildable_tensorrt
from repo_builder.compile.tensorrt_api import load_timing_cache
from repo_builder.errors import ToolError, UserError
from repo_builder.gpu import GpuInfo


@pytest.fixture
def deferred_repo(tmp_path: Path) -> Path:
    onnx_path = make_image_onnx(tmp_path / "export" / "model.onnx")
    repo = tmp_path / "repo"
    for model, precision in (("a_fp32", "fp32"), ("b_fp16", "fp16")):
        (repo / model).mkdir(parents=True)
        (repo / model / "config.pbtxt").write_text(TENSORRT_CONFIG.replace('"classifier"', f'"{model}"'))
        # b_fp16 as recipes written before precision moved into the graph: TensorRT 10's builder flags.
        defer_plan(onnx_path, IMAGE_SIGNATURE, repo / model / "1",
                   CompileSettings(max_batch_size=8, precision=precision, precision_flags=precision != "fp32"))
    return repo


def _tamper(repo: Path, **changes: object) -> Path:
    recipe = repo / "a_fp32" / "1" / "compile.json"
    data = json.loads(recipe.read_text())
    data.update(changes)
    recipe.write_text(json.dumps(data))
    return recipe


@pytest.mark.parametrize("field, value", [
    ("onnx", "../../../victim/precious.txt"),
    ("extra_files", ["../../../victim/precious.txt"]),
    ("extra_files", ["/tmp/absolute/precious.txt"]),
])
def test_compile_pending_refuses_and_deletes_nothing_when_recipe_name_leaves_version_folder(deferred_repo: Path, capsys, field: str, value: object):
    victim = deferred_repo.parent / "victim" / "precious.txt"
    victim.parent.mkdir()
    victim.write_text("keep me")
    recipe = _tamper(deferred_repo, **{field: value})
    before = tree_digest(deferred_repo)
    code = main(["compile-pending", str(deferred_repo), "--keep-onnx"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert err[-1].startswith(f"error: {recipe}: names '") and "not a file inside its version folder" in err[-1]
    assert victim.read_text() == "keep me" and tree_digest(deferred_repo) == before


def test_compile_pending_refuses_symlink_out_of_version_folder_when_recipe_names_it(deferred_repo: Path, capsys):
    victim = deferred_repo.parent / "victim.bin"
    victim.write_bytes(b"keep me")
    (deferred_repo / "a_fp32" / "1" / "weights.bin").symlink_to(victim)
    recipe = _tamper(deferred_repo, extra_files=["weights.bin"])
    code = main(["compile-pending", str(deferred_repo)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err[-1] == (
        f"error: {recipe}: 'weights.bin' leads outside its version folder; nothing was read or deleted. "
        "Rebuild the recipe with 'repo-builder build --defer-compile'"
    )
    assert victim.read_bytes() == b"keep me" and (deferred_repo / "a_fp32" / "1" / "weights.bin").is_symlink()


def _env(version: str) -> dict[str, BuildEnvironment]:
    # No GPU or TensorRT here: the environment a GPU machine would report, to test the pre-check alone.
    return {"auto": BuildEnvironment(GpuInfo(0, "NVIDIA H100", "9.0"), "api", version)}


def test_precheck_refuses_fp16_recipe_before_any_build_when_tensorrt11_and_fp32_onnx(deferred_repo: Path):
    recipes = find_recipes(deferred_repo)
    with pytest.raises(UserError, match=r"^b_fp16/1: --precision fp16 with TensorRT 11: networks are strongly typed.*nothing was built$"):
        _precheck(recipes, _env("11.1.0"), None, None)
    _precheck(recipes, _env("10.3.0"), None, None)  # TensorRT 10 builds both (fp16 is a builder flag)


def test_precheck_refuses_when_machine_tensorrt_differs_from_serving_release(deferred_repo: Path):
    with pytest.raises(UserError, match=r"builds with TensorRT 10\.5\.0 .* ships TensorRT 10\.3\.0.*nothing was built"):
        _precheck(find_recipes(deferred_repo), _env("10.5.0"), None, "10.3.0")
    _precheck(find_recipes(deferred_repo), _env("10.3.0.26"), None, "10.3.0")


@pytest.mark.parametrize("version", ["8.6.1", "9.3.0"])
def test_check_tensorrt_major_refuses_with_tool_error_when_below_10(version: str):
    with pytest.raises(ToolError, match=f"is TensorRT {version}; repo-builder builds with TensorRT 10 or later"):
        check_tensorrt_major(version, "trtexec")
    check_tensorrt_major("10.0.1", "trtexec")
    check_tensorrt_major("11.1.0", "trtexec")


def test_compile_pending_exits_2_before_gpu_work_when_release_ships_tensorrt8(deferred_repo: Path, capsys):
    before = tree_digest(deferred_repo)
    assert main(["compile-pending", str(deferred_repo), "--triton-release", "24.04"]) == 2
    assert "ships TensorRT 8.6.3; repo-builder builds plans with TensorRT 10 or later" in capsys.readouterr().err
    assert tree_digest(deferred_repo) == before
    with pytest.raises(UserError):
        require_buildable_tensorrt("8.6.1")


@pytest.mark.parametrize("release", ["foo", "24.13", "21.01", "25.07"])
def test_compile_pending_exits_2_listing_known_releases_when_triton_release_unknown(deferred_repo: Path, capsys, release: str):
    assert main(["compile-pending", str(deferred_repo), "--triton-release", release]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "known: 23.01 .. " in err[0]


def test_compile_pending_exits_2_when_tensorrt_version_malformed(deferred_repo: Path, capsys):
    assert main(["compile-pending", str(deferred_repo), "--tensorrt-version", "ten"]) == 2
    assert "is not a version like 10.3.0" in capsys.readouterr().err


class _RecordingConfig:
    """Stands in for tensorrt.IBuilderConfig (TensorRT cannot run here): its set_timing_cache returns
    False for a cache recorded on another device, as the binding documents with ignore_mismatch=False."""

    def __init__(self, accepts: bool) -> None:
        self.accepts = accepts
        self.given: list[bytes] = []

    def create_timing_cache(self, data: bytes) -> bytes:
        return data

    def set_timing_cache(self, cache: bytes, ignore_mismatch: bool) -> bool:
        assert ignore_mismatch is False
        self.given.append(cache)
        return self.accepts or cache == b""


def test_load_timing_cache_reports_and_builds_without_it_when_cache_from_another_device(tmp_path: Path):
    cache = tmp_path / "timing.cache"
    cache.write_bytes(b"timings from an A100")
    said: list[str] = []
    config = _RecordingConfig(accepts=False)
    assert load_timing_cache(config, cache, said.append) is False
    assert config.given == [b"timings from an A100", b""]
    assert len(said) == 1 and "recorded on another GPU or TensorRT version" in said[0] and str(cache) in said[0]
    assert cache.read_bytes() == b"timings from an A100"


def test_load_timing_cache_is_silent_when_cache_matches(tmp_path: Path):
    said: list[str] = []
    assert load_timing_cache(_RecordingConfig(accepts=True), None, said.append) is True
    assert said == []
