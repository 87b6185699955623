"""``validate --live`` when a model's own code kills its process or the server: RB905, never RB902.

The classes found in published repositories (Triton QA ``init_exit``, ``L0_warmup/failing_infer``,
``bls_model_loading``): initialize() calling exit(), the Python stub dying under the model (the backend
only says "Stub process ... is not healthy"), and the whole server dying during a warmup request.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.triton_repo_factory import Ensemble, Step, Tensor, write_ensemble, write_python_model

from repo_builder.live.judge import LiveSettings, Status, validate_live
from repo_builder.validate.engine import validate_repository
from repo_builder.validate.records import Severity
from repo_builder.validate.report import Report

pytestmark = pytest.mark.triton


def _model_py(initialize: str = "pass", execute: str = "pass") -> str:
    return f"""
import os
import signal
import sys

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        {initialize}

    def execute(self, requests):
        {execute}
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", np.ones(4, np.float32))]) for _ in requests]
"""


# One warmup request at load: the model's execute() runs before the load answers.
WARMUP = (
    'model_warmup [{ name: "w" batch_size: 1 inputs { key: "INPUT0" '
    "value { data_type: TYPE_FP32 dims: [4] zero_data: true } } }]\n"
)
CRASHING = {
    "a_sys_exit": {"model_py": _model_py("sys.exit(0)")},  # QA init_exit
    "a_os_exit": {"model_py": _model_py("print('no licence server, giving up', flush=True); os._exit(3)")},
    "a_segv_init": {"model_py": _model_py("os.kill(os.getpid(), signal.SIGSEGV)")},
    "a_segv_warmup": {"model_py": _model_py(execute="os.kill(os.getpid(), signal.SIGSEGV)"), "extra": WARMUP},
    # The server itself dies during the model's warmup (QA failing_infer: signal 11; bls_model_loading: 6).
    "a_abort_warmup": {"model_py": _model_py(execute="os.killpg(0, signal.SIGABRT)"), "extra": WARMUP},
}
# Takes the server down and removes the repository it serves: no fresh server can start after it.
FATAL_MODEL_PY = _model_py(
    "import shutil; shutil.rmtree(os.path.dirname(args['model_repository'])); os.killpg(0, signal.SIGABRT)"
)


@pytest.fixture(scope="module")
def judged(tmp_path_factory: pytest.TempPathFactory) -> tuple[Report, Report, list[str]]:
    repo = tmp_path_factory.mktemp("crash") / "repo"
    for name, kwargs in CRASHING.items():
        write_python_model(repo, name, **kwargs)
    write_python_model(repo, "b_fine")
    write_ensemble(
        repo,
        Ensemble("c_uses_fine", (Tensor("X"),), (Tensor("Y"),), (Step("b_fine", (("INPUT0", "X"),), (("OUTPUT0", "Y"),)),)),
    )
    offline = validate_repository(repo)
    lines: list[str] = []
    return offline, validate_live(offline, LiveSettings(load_timeout=30), progress=lines.append), lines


def _codes(report: Report, model: str) -> set[str]:
    return {d.code for d in report.for_model(model)}


def test_validate_live_reports_model_code_failed_not_disagreement_when_model_process_dies(
    judged: tuple[Report, Report, list[str]],
) -> None:
    offline, report, _ = judged
    assert not [d for d in offline.diagnostics if d.severity == Severity.ERROR]  # offline said ok: RB902 was possible
    for name in CRASHING:
        live = {m.name: m.live for m in report.models}[name]
        assert live is not None and live.status == Status.MODEL_CODE_FAILED, (name, live)
        assert _codes(report, name) == {"RB905"}, (name, report.for_model(name))


def test_validate_live_gives_the_stub_death_and_model_output_when_process_exits(judged: tuple[Report, Report, list[str]]) -> None:
    _, report, _ = judged
    live = {m.name: m.live for m in report.models}
    assert "SystemExit: 0" in (live["a_sys_exit"].reason or "")  # type: ignore[union-attr]
    exited = live["a_os_exit"].reason or ""  # type: ignore[union-attr]
    assert "is not healthy" in exited and "no licence server, giving up" in exited
    assert "warmup" in (live["a_segv_warmup"].reason or "")  # type: ignore[union-attr]


def test_validate_live_restarts_server_and_goes_on_when_a_model_crashes_it(judged: tuple[Report, Report, list[str]]) -> None:
    _, report, _ = judged
    live = {m.name: m.live for m in report.models}
    crash = live["a_abort_warmup"].reason or ""  # type: ignore[union-attr]
    assert "died while loading it (was killed by signal 6)" in crash and "the log ends:" in crash
    assert live["b_fine"].loaded and live["c_uses_fine"].loaded and live["c_uses_fine"].inferred  # type: ignore[union-attr]


def test_validate_live_prints_loading_line_before_each_verdict_when_progress_given(
    judged: tuple[Report, Report, list[str]],
) -> None:
    _, report, lines = judged
    for model in report.models:
        start, end = f"live: loading {model.name} ...", f"live: {model.name}: "
        assert start in lines and lines.index(start) + 1 == next(i for i, line in enumerate(lines) if line.startswith(end))


def test_validate_live_reports_rest_not_proven_when_server_cannot_restart(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    write_python_model(repo, "a_fatal", model_py=FATAL_MODEL_PY)
    write_python_model(repo, "b_after")
    report = validate_live(validate_repository(repo), LiveSettings(load_timeout=30))
    live = {m.name: m.live for m in report.models}
    assert live["a_fatal"] is not None and live["a_fatal"].status == Status.MODEL_CODE_FAILED
    after = live["b_after"]
    assert after is not None and after.status == Status.NOT_PROVEN
    assert "could not be restarted after 'a_fatal' crashed the server" in (after.reason or "")
    assert _codes(report, "b_after") == {"RB904"} and not report.ok
    assert repo.is_dir()  # only the staged copy was removed, never the user's repository
