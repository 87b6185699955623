"""RB1xx: repository and version folders, each rule with a repository that breaks it and one that does not."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from support.validate_repo_helpers import (
    ADD_SUB_MODEL_PY,
    codes,
    make_add_sub,
    make_model,
    messages,
    onnx_bytes,
    validate,
)

from repo_builder.validate.analysis.versions import versions_to_load
from repo_builder.validate.records import Severity
from repo_builder.validate.scan import scan_repository

PY = 'backend: "python"\n'
ENSEMBLE = """platform: "ensemble"
input [{ name: "IN" data_type: TYPE_FP32 dims: [4] }]
output [{ name: "OUT" data_type: TYPE_FP32 dims: [4] }]
ensemble_scheduling { step [{ model_name: "add_sub" model_version: -1
  input_map { key: "INPUT0" value: "IN" } input_map { key: "INPUT1" value: "IN" }
  output_map { key: "OUTPUT0" value: "OUT" } }] }
"""


def test_hidden_model_folder_warned_and_refused_when_ipynb_checkpoints_in_repository(repo: Path) -> None:
    make_add_sub(repo)
    (repo / ".ipynb_checkpoints").mkdir()
    report = validate(repo)
    assert "RB101" in codes(report, ".ipynb_checkpoints", Severity.WARNING)
    assert "RB101" not in codes(report, ".ipynb_checkpoints", Severity.ERROR)
    hint = next(d.hint for d in report.diagnostics if d.code == "RB101")
    assert hint and "move it out" in hint
    # No config and nothing to auto-complete from: Triton cannot load it, and other rules say why.
    assert codes(report, ".ipynb_checkpoints", Severity.ERROR)
    assert not report.ok
    assert codes(report, "add_sub") == set()


def test_hidden_model_folder_loads_when_hidden_folder_is_a_valid_model(repo: Path) -> None:
    # Triton loads `.add_sub` as a model named '.add_sub' (recorded from the server: hidden_dir-5422981f).
    make_add_sub(repo, ".add_sub")
    report = validate(repo)
    assert codes(report, ".add_sub", Severity.WARNING) == {"RB101"}
    assert codes(report, ".add_sub", Severity.ERROR) == set()
    assert report.ok


def test_hidden_model_folder_refused_when_config_name_differs(repo: Path) -> None:
    model = make_add_sub(repo, ".add_sub")
    config = model / "config.pbtxt"
    config.write_text(config.read_text().replace('name: ".add_sub"', 'name: "add_sub"'))
    assert "RB106" in codes(validate(repo), ".add_sub", Severity.ERROR)


def test_hidden_model_folder_silent_when_only_visible_models(repo: Path) -> None:
    make_add_sub(repo)
    assert "RB101" not in codes(validate(repo))


@pytest.mark.skipif(os.geteuid() == 0, reason="root lists folders whatever their mode")
def test_folder_unreadable_flagged_when_version_folder_mode_000(repo: Path) -> None:
    model = make_model(repo, "broken", PY, {1: {"model.py": ADD_SUB_MODEL_PY}})
    os.chmod(model / "1", 0o000)
    try:
        assert "RB102" in codes(validate(repo), "broken", Severity.ERROR)
    finally:
        os.chmod(model / "1", 0o755)


def test_symlink_leaves_repository_warned_when_link_points_at_itself(repo: Path) -> None:
    model = make_add_sub(repo)
    (model / "1" / "weights.bin").symlink_to(model / "1" / "weights.bin")  # ELOOP: broken everywhere
    report = validate(repo)
    assert "RB103" in codes(report, "add_sub", Severity.WARNING)


def test_folder_unreadable_flagged_when_scan_reports_unlistable_version(repo: Path) -> None:
    from dataclasses import replace

    from repo_builder.validate.engine import check_repository

    make_add_sub(repo)
    scanned = scan_repository(repo)
    model = scanned.models[0]
    broken = replace(model.versions[0], ignored="cannot list /x/add_sub/1: Permission denied", files=())
    report = check_repository(replace(scanned, models=(replace(model, versions=(broken,)),)))
    assert "RB102" in codes(report, "add_sub", Severity.ERROR)
    assert "RB102" not in codes(validate(repo))


def test_symlink_leaves_repository_refused_when_model_file_links_outside(repo: Path, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere.py"
    outside.write_text(ADD_SUB_MODEL_PY)
    model = make_add_sub(repo)
    (model / "1" / "model.py").unlink()
    (model / "1" / "model.py").symlink_to(outside)
    report = validate(repo)
    assert "RB103" in codes(report, "add_sub", Severity.ERROR)
    assert not report.ok


def test_symlink_leaves_repository_silent_when_link_stays_inside(repo: Path) -> None:
    model = make_add_sub(repo)
    (model / "1" / "model.py").rename(model / "shared.py")
    (model / "1" / "model.py").symlink_to(model / "shared.py")
    assert "RB103" not in codes(validate(repo))


def test_symlink_leaves_repository_warned_when_model_folder_links_outside(repo: Path, tmp_path: Path) -> None:
    real = make_add_sub(tmp_path / "other")
    (repo / "add_sub").symlink_to(real)
    report = validate(repo)
    assert "RB103" in codes(report, "add_sub")


def test_non_utf8_name_flagged_when_model_folder_has_latin1_bytes(repo: Path) -> None:
    name = os.fsdecode(b"caf\xe9")
    make_model(repo, name, None, {1: {"model.py": ADD_SUB_MODEL_PY}})
    report = validate(repo)
    assert "RB104" in codes(report, name, Severity.ERROR)


def test_non_utf8_name_silent_when_folder_name_is_utf8(repo: Path) -> None:
    make_add_sub(repo, "café")
    report = validate(repo)
    assert "RB104" not in codes(report)
    assert report.ok


def test_config_missing_error_when_strict(repo: Path) -> None:
    make_model(
        repo, "densenet", None, {1: {"model.onnx": onnx_bytes([("x", 1, [1, 4])], [("y", 1, [1, 4])])}}
    )
    report = validate(repo, strict=True)
    assert "RB105" in codes(report, "densenet", Severity.ERROR)
    assert "failed to open text file for read densenet/config.pbtxt" in messages(report, "RB105")[0]


def test_config_missing_is_info_when_auto_complete_can_fill_it(repo: Path) -> None:
    make_model(
        repo, "densenet", None, {1: {"model.onnx": onnx_bytes([("x", 1, [1, 4])], [("y", 1, [1, 4])])}}
    )
    report = validate(repo)
    assert codes(report, "densenet", Severity.INFO) == {"RB105"}
    assert "onnxruntime" in messages(report, "RB105")[0]
    assert report.ok


PLAIN_PY = "class TritonPythonModel:\n    def execute(self, requests):\n        return []\n"
AUTOCOMPLETE_PY = (
    "class TritonPythonModel:\n"
    "    @staticmethod\n"
    "    def auto_complete_config(config):\n"
    "        return config\n\n"
    "    def execute(self, requests):\n"
    "        return []\n"
)


def _config_missing_hints(repo: Path) -> list[str | None]:
    return [d.hint for d in validate(repo).diagnostics if d.code == "RB105"]


def test_config_missing_hint_says_no_io_when_python_model_has_no_auto_complete_config(repo: Path) -> None:
    # The real 2.51 loads such a model with no inputs, no outputs and max_batch_size 0.
    make_model(repo, "plain", None, {1: {"model.py": PLAIN_PY}})
    [hint] = _config_missing_hints(repo)
    assert hint is not None and "no auto_complete_config" in hint and "no inputs or outputs" in hint
    assert "need the model file" not in hint


def test_config_missing_hint_needs_model_file_when_python_model_has_auto_complete_config(repo: Path) -> None:
    make_model(repo, "auto", None, {1: {"model.py": AUTOCOMPLETE_PY}})
    [hint] = _config_missing_hints(repo)
    assert hint is not None and "need the model file" in hint


def test_config_missing_silent_when_config_present(repo: Path) -> None:
    make_add_sub(repo)
    assert "RB105" not in codes(validate(repo, strict=True))


def test_model_name_mismatch_flagged_with_triton_message(repo: Path) -> None:
    make_model(repo, "resnet", 'name: "resnet50"\n' + PY, {1: {"model.py": ADD_SUB_MODEL_PY}})
    report = validate(repo)
    assert messages(report, "RB106") == [
        "unexpected directory name 'resnet' for model 'resnet50', directory name must equal model name"
    ]


def test_model_name_mismatch_silent_when_name_empty_or_equal(repo: Path) -> None:
    make_model(repo, "a", PY, {1: {"model.py": ADD_SUB_MODEL_PY}})
    make_model(repo, "b", 'name: "b"\n' + PY, {1: {"model.py": ADD_SUB_MODEL_PY}})
    assert "RB106" not in codes(validate(repo))


@pytest.mark.parametrize(
    ("folder", "text"),
    [
        ("01", "ignore version directory '01' which contains leading zeros in its directory name"),
        ("v2", "ignore version directory 'v2' which fails to convert to integral number"),
    ],
)
def test_version_folder_ignored_warned_with_triton_text(repo: Path, folder: str, text: str) -> None:
    make_model(repo, "m", PY, {1: {"model.py": ADD_SUB_MODEL_PY}, folder: {"model.py": ADD_SUB_MODEL_PY}})
    report = validate(repo)
    assert messages(report, "RB107") == [text]
    assert report.ok  # version 1 still loads


def test_version_folder_ignored_silent_for_reserved_folders(repo: Path) -> None:
    make_model(
        repo, "m", PY, {1: {"model.py": ADD_SUB_MODEL_PY}, "warmup": {}, "initial_state": {}, "configs": {}}
    )
    report = validate(repo)
    assert "RB107" not in codes(report)
    assert report.ok


def test_version_folder_not_canonical_flagged_when_folder_is_1a(repo: Path) -> None:
    make_model(repo, "m", PY, {"1a": {"model.py": ADD_SUB_MODEL_PY}})
    report = validate(repo)
    assert "RB108" in codes(report, "m", Severity.ERROR)
    assert "from the folder '1'" in messages(report, "RB108")[0]


def test_version_folder_not_canonical_silent_when_folder_is_1(repo: Path) -> None:
    make_model(repo, "m", PY, {1: {"model.py": ADD_SUB_MODEL_PY}})
    assert "RB108" not in codes(validate(repo))


def test_specific_version_missing_flagged_with_triton_message(repo: Path) -> None:
    config = PY + "version_policy: { specific: { versions: [1, 3] } }\n"
    make_model(repo, "m", config, {1: {"model.py": ADD_SUB_MODEL_PY}})
    report = validate(repo)
    assert messages(report, "RB109") == [
        "version 3 is specified for model 'm', but the version directory is not present"
    ]
    assert "RB110" not in codes(report)  # version 1 still loads


def test_specific_version_missing_silent_when_all_present(repo: Path) -> None:
    config = PY + "version_policy: { specific: { versions: [1, 2] } }\n"
    make_model(repo, "m", config, {1: {"model.py": ADD_SUB_MODEL_PY}, 2: {"model.py": ADD_SUB_MODEL_PY}})
    assert "RB109" not in codes(validate(repo))


def test_no_version_available_flagged_for_ensemble_without_version_folder(repo: Path) -> None:
    make_add_sub(repo)
    make_model(repo, "pipeline", ENSEMBLE, versions={})
    report = validate(repo)
    assert messages(report, "RB110") == [
        "at least one version must be available under the version policy of model 'pipeline'"
    ]
    hint = next(d.hint for d in report.diagnostics if d.code == "RB110")
    assert hint and "placeholder" in hint


def test_no_version_available_silent_for_ensemble_with_empty_version_folder(repo: Path) -> None:
    make_add_sub(repo)
    make_model(repo, "pipeline", ENSEMBLE, versions={1: {}})
    assert "RB110" not in codes(validate(repo))


def test_no_version_available_flagged_when_only_leading_zero_folder(repo: Path) -> None:
    make_model(repo, "m", PY, {"01": {"model.py": ADD_SUB_MODEL_PY}})
    report = validate(repo)
    assert {"RB107", "RB110"} <= codes(report, "m")
    assert not report.ok


def test_no_version_available_flagged_when_latest_num_versions_zero(repo: Path) -> None:
    make_model(repo, "m", PY + "version_policy: { latest: { } }\n", {1: {"model.py": ADD_SUB_MODEL_PY}})
    assert "RB110" in codes(validate(repo), "m")


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        ("", (3,)),
        ("version_policy: { latest: { num_versions: 2 } }", (2, 3)),
        ("version_policy: { all: { } }", (1, 2, 3)),
        ("version_policy: { specific: { versions: [1, 7] } }", (1,)),
    ],
)
def test_versions_to_load_follows_policy_when_three_versions(
    repo: Path, policy: str, expected: tuple[int, ...]
) -> None:
    make_model(repo, "m", PY + policy, {v: {"model.py": ADD_SUB_MODEL_PY} for v in (1, 2, 3)})
    model = scan_repository(repo).models[0]
    assert versions_to_load(model) == expected


def test_scan_repository_parses_many_configs_in_two_processes_with_same_result(repo: Path) -> None:
    import subprocess
    import sys

    from repo_builder.validate import scan

    for i in range(scan.PARALLEL_MIN_CONFIGS + 10):
        config = PY if i % 7 else 'backend: "python"\nmax_batch_size: oops\n'  # some parse errors too
        make_model(repo, f"m{i:03d}", config, {1: {"model.py": ADD_SUB_MODEL_PY}})
    # A fresh interpreter: this test process may have threads, which (rightly) turn the fork off.
    code = f"""
import os
from repo_builder.validate import scan
if not scan._can_fork():
    print("skip")
    raise SystemExit(0)
forks = []
real_fork = os.fork
os.fork = lambda: forks.append(1) or real_fork()
parallel = scan.scan_repository({str(repo)!r})
assert forks, "the second parser process was not used"
scan.PARALLEL_MIN_CONFIGS = 10**9
serial = scan.scan_repository({str(repo)!r})
assert parallel == serial
print(sum(1 for m in parallel.models if m.config_problem and m.config_line))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    if done.stdout.strip() == "skip":
        pytest.skip(reason="needs two CPUs to fork a parser")
    assert int(done.stdout) == len(range(0, scan.PARALLEL_MIN_CONFIGS + 10, 7))  # errors keep their line
