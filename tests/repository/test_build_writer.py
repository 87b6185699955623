"""The writer on small hand-made models (no export needed): stage beside --out, the lock, version pins,
validation before anything moves, the ensemble bridge, versions that share a config."""

from __future__ import annotations

import hashlib
import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from repo_builder.errors import RefusedError, ToolError, UserError
from repo_builder.pipelines.build_check import rehearsal_options
from repo_builder.render.parse_back import parse_config
from repo_builder.render.rendered import RenderedModel
from repo_builder.repository.judge import repository_judge
from repo_builder.repository.lock import lock_path, repository_lock
from repo_builder.repository.manifest import MANIFEST_FILE, update_manifest
from repo_builder.repository.moves import Kind, Move
from repo_builder.repository.stage import (
    STAGE_MARK,
    build_stage,
    remove_stale_stages,
    stage_prefix,
)
from repo_builder.repository.versions import choose_versions, existing_versions, served_versions
from repo_builder.repository.writer import (
    Judge,
    StagedModel,
    bridge_config,
    candidate_plans,
    commit_models,
    rehearse,
    stage_model,
)
from repo_builder.signals import interrupt_on_termination

CONFIG = 'name: "{name}"\nbackend: "python"\nmax_batch_size: 4\n'
MEMBER = """name: "post"
backend: "python"
max_batch_size: 4
input [{{ name: "x" data_type: TYPE_FP32 dims: [4] }}]
output [{{ name: "y" data_type: TYPE_FP32 dims: [{k}] }}]
"""
ENSEMBLE = """name: "ens"
platform: "ensemble"
max_batch_size: 4
input [{{ name: "x" data_type: TYPE_FP32 dims: [4] }}]
output [{{ name: "y" data_type: TYPE_FP32 dims: [{k}] }}]
ensemble_scheduling {{ step [{{ model_name: "post" model_version: -1 input_map {{ key: "x" value: "x" }} output_map {{ key: "y" value: "y" }} }}] }}
"""
JUDGE = repository_judge(rehearsal_options("python", False))


def python_model(name: str, version: int, marker: str = "v", config: str | None = None) -> RenderedModel:
    source = f"class TritonPythonModel:\n    MARK = {marker!r}\n\n    def execute(self, requests):\n        return []\n".encode()
    return RenderedModel(name, "preprocess", version, config or CONFIG.format(name=name), {"model.py": source})


def top_k_pair(version: int, k: int) -> list[RenderedModel]:
    """A member whose output width is k and the ensemble that returns it: --top-k in miniature."""
    member = python_model("post", version, f"k{k}", MEMBER.format(k=k))
    ensemble = RenderedModel("ens", "ensemble", version, ENSEMBLE.format(k=k), {"placeholder.txt": b""})
    return [member, ensemble]


def write(out: Path, models: list[RenderedModel], judge: Judge | None = None) -> list[StagedModel]:
    with build_stage(out) as stage:
        staged = [stage_model(stage, m) for m in models]
        commit_models(stage, staged, judge=judge)
    return staged


def config_of(out: Path, name: str) -> Any:  # a ModelConfig proto
    return parse_config((out / name / "config.pbtxt").read_text(), name)


def served(out: Path, name: str) -> tuple[int, ...]:
    return served_versions(config_of(out, name), existing_versions(out / name))


def test_choose_versions_picks_next_free_version_when_steps_differ(tmp_path: Path) -> None:
    for rel in ("a/1", "a/3", "a/07", "a/tmp", "b/1"):
        (tmp_path / rel).mkdir(parents=True)
    assert existing_versions(tmp_path / "a") == (1, 3)  # '07' and 'tmp' are ignored by Triton
    assert choose_versions(tmp_path, ["a", "b", "c"], None, False) == {"a": 4, "b": 2, "c": 1}


def test_choose_versions_raises_user_error_when_version_exists_without_force(tmp_path: Path) -> None:
    (tmp_path / "a" / "2").mkdir(parents=True)
    with pytest.raises(UserError, match="--force"):
        choose_versions(tmp_path, ["a", "b"], 2, False)
    assert choose_versions(tmp_path, ["a", "b"], 2, True) == {"a": 2, "b": 2}


def test_build_stage_lives_beside_out_and_nothing_inside_when_staging(tmp_path: Path) -> None:
    out = tmp_path / "repo"
    write(out, [python_model("pre", 1)])
    with build_stage(out) as stage:
        assert stage.root.parent == tmp_path
        assert stage.root.name == f".repo{STAGE_MARK}{os.getpid()}"
        assert sorted(p.name for p in out.iterdir()) == ["pre"]  # Triton sees nothing of the stage
        assert lock_path(out).read_text() == f"{os.getpid()}\n"
    assert not stage.root.exists()
    assert not lock_path(out).exists()


def test_commit_writes_first_repository_whole_when_out_missing(tmp_path: Path) -> None:
    out = tmp_path / "new" / "repo"
    write(out, [python_model("pre", 1), python_model("post", 1)], JUDGE)
    assert sorted(p.name for p in out.iterdir()) == ["post", "pre"]
    assert (out / "pre" / "1" / "model.py").is_file()
    assert sorted(p.name for p in out.parent.iterdir()) == ["repo"]  # no stage, no lock left beside


def test_build_stage_removes_folders_it_created_when_build_fails(tmp_path: Path) -> None:
    out = tmp_path / "a" / "b" / "repo"
    with pytest.raises(RuntimeError), build_stage(out):
        raise RuntimeError("export failed")
    assert list(tmp_path.iterdir()) == []  # no empty --out, no empty parents


def test_remove_stale_stages_removes_beside_and_legacy_inside_when_lock_is_held(tmp_path: Path) -> None:
    out = tmp_path / "repo"
    write(out, [python_model("pre", 1)])
    beside = tmp_path / f"{stage_prefix(out)}999999999"
    legacy_root = out / f"{STAGE_MARK}abc"
    legacy_model = out / "pre" / f"{STAGE_MARK}def"
    other = tmp_path / f".other{STAGE_MARK}1"  # another repository's stage: not ours to remove
    for folder in (beside, legacy_root, legacy_model, other):
        folder.mkdir()
    with repository_lock(out):
        assert sorted(remove_stale_stages(out)) == sorted([beside, legacy_root, legacy_model])
    assert other.exists()


def test_repository_lock_raises_tool_error_naming_the_holder_when_already_held(tmp_path: Path) -> None:
    out = tmp_path / "repo"
    with repository_lock(out), pytest.raises(ToolError, match=f"another build is writing it \\(PID {os.getpid()} holds"), repository_lock(out):
        pass
    with repository_lock(out):  # released: free again
        pass


def test_interrupt_on_termination_raises_keyboard_interrupt_when_sigterm_arrives() -> None:
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(KeyboardInterrupt, match="SIGTERM"), interrupt_on_termination():
        os.kill(os.getpid(), signal.SIGTERM)
        signal.sigtimedwait([], 0.1)  # let the handler run
    assert signal.getsignal(signal.SIGTERM) == before


def test_commit_pins_every_config_to_its_version_when_written(tmp_path: Path) -> None:
    out = tmp_path / "repo"
    write(out, [python_model("pre", 1)])
    write(out, [python_model("pre", 2, "two")])
    assert list(config_of(out, "pre").version_policy.specific.versions) == [2]


def test_commit_adds_version_under_a_pin_then_switches_config_when_model_exists(tmp_path: Path) -> None:
    out = tmp_path / "repo"
    (out / "pre" / "1").mkdir(parents=True)  # written by an older repo-builder: no pin yet
    (out / "pre" / "1" / "model.py").write_text("class TritonPythonModel:\n    def execute(self, requests):\n        return []\n")
    (out / "pre" / "config.pbtxt").write_text(CONFIG.format(name="pre"))
    seen: list[tuple[str, tuple[int, ...]]] = []
    with build_stage(out) as stage:
        staged = [stage_model(stage, python_model("pre", 2, "two"))]
        moves = commit_models(stage, staged, judge=JUDGE, after_move=lambda m: seen.append((m.kind.value, served(out, "pre"))))
    assert [m.kind for m in moves] == [Kind.WRITE_CONFIG, Kind.ADD_VERSION, Kind.WRITE_CONFIG]
    # Version 2 appears only with its own config: the served version changes on one config write.
    assert seen == [("write config", (1,)), ("add version", (1,)), ("write config", (2,))]


def test_commit_refuses_and_moves_nothing_when_the_result_fails_validation(tmp_path: Path) -> None:
    out = tmp_path / "repo"
    write(out, [python_model("pre", 1)])
    before = sorted(str(p.relative_to(out)) for p in out.rglob("*"))
    broken = RenderedModel("pre", "preprocess", 2, CONFIG.format(name="pre"), {"model.py": b"x = 1\n"})  # no TritonPythonModel
    with pytest.raises(RefusedError, match="nothing was moved"):
        write(out, [broken], JUDGE)
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*")) == before


def test_first_build_refused_leaves_no_out_when_validation_fails(tmp_path: Path) -> None:
    out = tmp_path / "repo"
    broken = RenderedModel("pre", "preprocess", 1, CONFIG.format(name="pre"), {"model.py": b"x = 1\n"})
    with pytest.raises(RefusedError):
        write(out, [broken], JUDGE)
    assert list(tmp_path.iterdir()) == []


def test_commit_refuses_older_version_when_it_would_change_the_config_newer_versions_share(tmp_path: Path) -> None:
    out = tmp_path / "repo"
    write(out, top_k_pair(1, 5))
    write(out, top_k_pair(2, 5))
    with pytest.raises(UserError, match="version 2 shares"):
        write(out, [python_model("post", 1, "k3", MEMBER.format(k=3))])  # --version 1 --force --top-k 3
    assert config_of(out, "post").output[0].dims == [5]
    assert "'k5'" in (out / "post" / "1" / "model.py").read_text()


def test_commit_replaces_older_version_when_config_is_unchanged(tmp_path: Path) -> None:
    out = tmp_path / "repo"
    write(out, [python_model("pre", 1, "old")])
    write(out, [python_model("pre", 2, "two")])
    write(out, [python_model("pre", 1, "new")], JUDGE)
    assert "'new'" in (out / "pre" / "1" / "model.py").read_text()
    assert served(out, "pre") == (2,)  # rebuilding an old version does not change what is served


def test_commit_replaces_served_version_through_a_spare_version_when_forced(tmp_path: Path) -> None:
    out = tmp_path / "repo"
    write(out, [python_model("pre", 1, "old")])
    seen: list[tuple[int, ...]] = []
    with build_stage(out) as stage:
        staged = [stage_model(stage, python_model("pre", 1, "new"))]
        moves = commit_models(stage, staged, judge=JUDGE, after_move=lambda m: seen.append(served(out, "pre")))
    assert Kind.EXCHANGE_VERSION in [m.kind for m in moves]
    # Version 1 is never rewritten while it is served: version 2 (a copy of the new one) stands in.
    assert seen == [(1,), (2,), (2,), (1,), (1,)]
    assert "'new'" in (out / "pre" / "1" / "model.py").read_text()
    assert existing_versions(out / "pre") == (1,)


def test_bridge_config_makes_changed_dims_wildcards_when_top_k_changes() -> None:
    old = parse_config(ENSEMBLE.format(k=5), "old")
    new = parse_config(ENSEMBLE.format(k=3), "new")
    bridge = bridge_config(old, new)
    assert list(bridge.output[0].dims) == [-1]
    assert list(bridge.input[0].dims) == [4]
    assert bridge_config(old, old) is None  # nothing changes: no bridge needed


def test_commit_bridges_the_ensemble_so_every_state_passes_when_members_change_interface(tmp_path: Path) -> None:
    out = tmp_path / "repo"
    write(out, top_k_pair(1, 5), JUDGE)
    with build_stage(out) as stage:
        staged = [stage_model(stage, m) for m in top_k_pair(2, 3)]
        plain, bridged = candidate_plans(stage, staged)
        assert rehearse(stage, plain, JUDGE).failures  # switching members first breaks the old ensemble
        assert not rehearse(stage, bridged, JUDGE).failures
        states: list[tuple[str, ...]] = []
        moves = commit_models(stage, staged, judge=JUDGE, after_move=lambda m: states.append(JUDGE(out)))
    assert moves[0] == Move(Kind.WRITE_CONFIG, "ens", config=moves[0].config, switch=True)
    assert all(not errors for errors in states), states
    assert list(config_of(out, "ens").output[0].dims) == [3]


def test_stage_model_moves_files_made_in_the_stage_when_given_paths(tmp_path: Path) -> None:
    out = tmp_path / "repo"
    with build_stage(out) as stage:
        big = stage.root / "export" / "model.onnx"
        big.parent.mkdir()
        big.write_bytes(b"onnx-bytes")
        outside = tmp_path / "labels.txt"
        outside.write_text("a\n")
        model = RenderedModel("m", "model", 1, CONFIG.format(name="m"), {"model.onnx": big, "labels.txt": outside, "model.py": b"x = 1\n"})
        staged = stage_model(stage, model)
        assert not big.exists()  # renamed, not copied
        assert outside.exists()  # copied from outside the stage
        assert staged.files["model.onnx"] == hashlib.sha256(b"onnx-bytes").hexdigest()


def test_rendered_model_rejects_paths_outside_version_folder_when_relative_escape() -> None:
    with pytest.raises(ValueError, match="relative path"):
        RenderedModel("m", "model", 1, "", {"../evil": b""})


def test_manifest_records_hashes_and_settings_when_models_written(tmp_path: Path) -> None:
    out = tmp_path / "repo"
    staged = write(out, [python_model("pre", 1)])
    update_manifest(out, staged, {"runtime": "python", "max_batch_size": 4})
    staged2 = write(out, [python_model("pre", 2, "two")])
    update_manifest(out, staged2, {"runtime": "python", "max_batch_size": 4})
    data = json.loads((out / MANIFEST_FILE).read_text())
    versions = data["models"]["pre"]["versions"]
    assert sorted(versions) == ["1", "2"]
    on_disk = hashlib.sha256((out / "pre" / "2" / "model.py").read_bytes()).hexdigest()
    assert versions["2"]["files"]["model.py"] == on_disk
    assert versions["2"]["settings"]["runtime"] == "python"
    assert data["models"]["pre"]["config_sha256"] == hashlib.sha256((out / "pre" / "config.pbtxt").read_bytes()).hexdigest()


def test_build_stage_raises_user_error_when_out_is_a_file(tmp_path: Path) -> None:
    out = tmp_path / "file"
    out.write_text("x")
    with pytest.raises(UserError, match="not a folder"), build_stage(out):
        pass


CHAIN = {
    "a": 'name: "a"\nbackend: "python"\nmax_batch_size: 4\ninput [{{ name: "x" data_type: TYPE_FP32 dims: [4] }}]\noutput [{{ name: "t" data_type: TYPE_FP32 dims: [{k}] }}]\n',
    "b": 'name: "b"\nbackend: "python"\nmax_batch_size: 4\ninput [{{ name: "t" data_type: TYPE_FP32 dims: [{k}] }}]\noutput [{{ name: "y" data_type: TYPE_FP32 dims: [2] }}]\n',
    "e": """name: "e"
platform: "ensemble"
max_batch_size: 4
input [{{ name: "x" data_type: TYPE_FP32 dims: [4] }}]
output [{{ name: "y" data_type: TYPE_FP32 dims: [2] }}]
ensemble_scheduling {{ step [
  {{ model_name: "a" model_version: -1 input_map {{ key: "x" value: "x" }} output_map {{ key: "t" value: "t" }} }},
  {{ model_name: "b" model_version: -1 input_map {{ key: "t" value: "t" }} output_map {{ key: "y" value: "y" }} }}
] }}
""",
}


def chain(version: int, k: int) -> list[RenderedModel]:
    """Two members whose shared tensor changes width: no ensemble config can bridge that."""
    members = [python_model(name, version, f"k{k}", CHAIN[name].format(k=k)) for name in ("a", "b")]
    return [*members, RenderedModel("e", "ensemble", version, CHAIN["e"].format(k=k), {"placeholder.txt": b""})]


def test_commit_warns_naming_the_state_when_no_order_keeps_every_state_loadable(tmp_path: Path) -> None:
    out = tmp_path / "repo"
    write(out, chain(1, 3), JUDGE)
    lines: list[str] = []
    with build_stage(out) as stage:
        staged = [stage_model(stage, m) for m in chain(2, 5)]
        commit_models(stage, staged, judge=JUDGE, log=lines.append)
    warnings = [line for line in lines if line.startswith("warning: no order of moves")]
    assert warnings and "after 'write config a'" in warnings[0] and "inconsistent shape" in warnings[0]
    assert not JUDGE(out)  # the final state passes
