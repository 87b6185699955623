"""`build` ends with the exact `repo-builder validate` command it ran, and running it gives the same verdict."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from repo_builder.cli.main import main
from repo_builder.errors import UserError
from repo_builder.export.tiny_models import make_tiny_text_classifier
from repo_builder.pipelines.build_check import CheckRequest, choose_check, rehearsal_options, run_check


def test_choose_check_allows_pending_plans_for_a_gpu_when_compile_is_deferred() -> None:
    plan = choose_check(Path("repo"), "tensorrt", True, CheckRequest())
    assert plan.argv == ["repo-builder", "validate", "repo", "--allow-pending", "--gpu"]
    assert plan.options.allow_pending and plan.options.gpu_present


def test_choose_check_repeats_every_validation_flag_when_given() -> None:
    request = CheckRequest(strict=True, gpu=False, live=True, tritonserver=Path("/opt/ts"), load_timeout=5)
    assert choose_check(Path("r"), "python", False, request).command == (
        "repo-builder validate r --strict --no-gpu --live --tritonserver /opt/ts --load-timeout 5"
    )


def test_choose_check_refuses_no_gpu_when_compile_is_deferred() -> None:
    with pytest.raises(UserError, match="--no-gpu"):
        choose_check(Path("r"), "tensorrt", True, CheckRequest(gpu=False))


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_text_classifier(tmp_path_factory.mktemp("tiny") / "bert", num_labels=2, seed=0)


def _build(argv: list[str], capsys: Any) -> tuple[int, dict[str, Any]]:
    capsys.readouterr()
    code = main(["build", *argv, "--format", "json", "-q"])
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    return code, json.loads(captured.out)


def test_build_verdict_equals_the_printed_validate_command_when_tensorrt_is_deferred(tiny_model: Path, tmp_path: Path, capsys: Any) -> None:
    repo = tmp_path / "repo"
    code, summary = _build(["text-classifier", "--model", str(tiny_model), "--runtime", "tensorrt", "--defer-compile",
                            "--out", str(repo), "--no-parity"], capsys)
    command = summary["validation"]["command"]
    assert "--allow-pending" in command and "--gpu" in command.split()
    argv = shlex.split(command)
    assert argv[:3] == ["repo-builder", "validate", str(repo)]
    assert main(argv[1:]) == code == 0
    # And without the flags build added, the same repository is refused: the flags matter.
    capsys.readouterr()
    assert main(["validate", str(repo), "--no-gpu"]) == 1


def test_build_summary_shows_untrained_head_when_new_head_is_given(tmp_path: Path, capsys: Any) -> None:
    bare = make_tiny_text_classifier(tmp_path / "bare", seed=3, with_head=False)
    labels = tmp_path / "labels.txt"
    labels.write_text("no\nyes\n")
    code, summary = _build(["text-classifier", "--model", str(bare), "--new-head", str(labels), "--runtime", "python",
                            "--out", str(tmp_path / "repo"), "--no-parity"], capsys)
    assert code == 0 and summary["head"] == "untrained"
    assert (tmp_path / "repo" / "text_classifier_postprocess" / "1" / "labels.txt").read_text() == "no\nyes\n"


def test_build_refuses_bare_encoder_in_one_line_when_no_head_is_asked(tmp_path: Path, capsys: Any) -> None:
    bare = make_tiny_text_classifier(tmp_path / "bare", seed=3, with_head=False)
    capsys.readouterr()  # transformers' own "Writing model shards" bar
    code = main(["build", "text-classifier", "--model", str(bare), "--runtime", "python", "--out", str(tmp_path / "repo"), "-q"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: --model") and err.count("\n") == 1, err


def test_rehearsal_options_equal_the_check_after_build_when_no_flags_given() -> None:
    for runtime, pending in (("python", False), ("onnx", False), ("tensorrt", True)):
        assert rehearsal_options(runtime, pending) == choose_check(Path("r"), runtime, pending, CheckRequest()).options


def test_repository_judge_imports_nothing_from_pipelines_when_loaded() -> None:
    # DESIGN.md: a module imports only what lies below it; repository/ is below pipelines/.
    code = "import sys, repo_builder.repository.judge as j; print(sorted(m for m in sys.modules if '.pipelines' in m))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


MODEL_PY = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("Y", pb_utils.get_input_tensor_by_name(r, "X").as_numpy())]) for r in requests]
"""


@pytest.mark.triton
def test_run_check_logs_each_load_and_reports_status_text_when_live(tmp_path: Path) -> None:
    for name, model_py in (("echo", MODEL_PY), ("broken", "import not_a_module_anywhere\n")):
        (tmp_path / name / "1").mkdir(parents=True)
        (tmp_path / name / "config.pbtxt").write_text(
            'backend: "python"\ninput [{ name: "X" data_type: TYPE_FP32 dims: [2] }]\n'
            'output [{ name: "Y" data_type: TYPE_FP32 dims: [2] }]\n',
            encoding="utf-8",
        )
        (tmp_path / name / "1" / "model.py").write_text(model_py, encoding="utf-8")
    lines: list[str] = []
    plan = choose_check(tmp_path, "python", False, CheckRequest(live=True, gpu=False, load_timeout=30))
    outcome = run_check(plan, log=lines.append)
    assert "live: loading echo ..." in lines and "live: echo: loaded" in lines
    assert lines.index("live: loading broken ...") + 1 == lines.index("live: broken: model code failed")
    assert outcome.live is not None and outcome.live["broken"]["status"] == "model-code-failed"
    assert outcome.live["broken"]["status_text"] == "model code failed" and "not_a_module_anywhere" in outcome.live["broken"]["reason"]
    assert outcome.live["echo"]["loaded"] and not outcome.ok
