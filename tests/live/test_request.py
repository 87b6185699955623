"""The pure pieces of issue 26's live gate: which request --live sends (--input files, the family's real
sample, synthesized), how its answer is checked, where a failing step's frame points in the user's
repository, the summary's "not proven" count and JUnit's most severe failure. No server is started here."""

from __future__ import annotations

import io
import json
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2

from repo_builder.errors import UserError
from repo_builder.live.outcome import failing_step, repository_frames
from repo_builder.live.request import RequestKind, check_answer, parse_input_file, plan_request
from repo_builder.live.samples import SAMPLES, check_classification, recorded_tasks
from repo_builder.validate.records import Diagnostic, Repository, Severity
from repo_builder.validate.report import ModelSummary, Report
from repo_builder.validate.reporters import RenderSettings, render_report
from repo_builder.validate.reporters.formatting import summary_line

TEXT_ENSEMBLE = """
name: "clf"
platform: "ensemble"
max_batch_size: 8
input [ { name: "TEXT" data_type: TYPE_STRING dims: [ 1 ] } ]
output [
  { name: "LABELS" data_type: TYPE_STRING dims: [ 3 ] },
  { name: "SCORES" data_type: TYPE_FP32 dims: [ 3 ] },
  { name: "CLASS_IDS" data_type: TYPE_INT64 dims: [ 3 ] }
]
"""


def config(text: str = TEXT_ENSEMBLE) -> model_config_pb2.ModelConfig:
    return text_format.Parse(text, model_config_pb2.ModelConfig())


def answer(batch: int = 3, scores: list[float] | None = None, ids: list[int] | None = None) -> dict[str, np.ndarray]:
    row = np.array(scores or [0.7, 0.2, 0.1], dtype=np.float32)
    return {
        "LABELS": np.array([[b"a", b"b", b"c"]] * batch, dtype=object),
        "SCORES": np.tile(row, (batch, 1)),
        "CLASS_IDS": np.tile(np.array(ids or [2, 0, 1], dtype=np.int64), (batch, 1)),
    }


def test_parse_input_file_reads_model_name_and_file_when_given(tmp_path: Path) -> None:
    (tmp_path / "r.txt").write_text("great film")
    plain = parse_input_file(f"TEXT={tmp_path / 'r.txt'}")
    scoped = parse_input_file(f"clf:TEXT={tmp_path / 'r.txt'}")
    assert (plain.model, plain.name, scoped.model, scoped.name) == (None, "TEXT", "clf", "TEXT")
    assert plain.applies_to("other") and scoped.applies_to("clf") and not scoped.applies_to("other")


@pytest.mark.parametrize("value", ["TEXT", "=x", ":TEXT=x", "TEXT=", "TEXT=/no/such/file"])
def test_parse_input_file_refuses_with_the_form_when_malformed(value: str) -> None:
    with pytest.raises(UserError, match="--input"):
        parse_input_file(value)


def test_plan_request_sends_the_family_sample_when_the_build_recorded_the_task() -> None:
    request = plan_request("clf", config(), "text-classification")
    assert request.kind == RequestKind.FAMILY and request.real
    texts = request.inputs["TEXT"]
    assert texts.shape == (len(SAMPLES["text-classification"].rows()), 1) and request.batch == texts.shape[0]
    assert all(b" " in t for t in texts.ravel())  # real sentences, not the synthesized filler
    assert "text-classification" in request.description


def test_plan_request_sends_a_real_jpeg_when_the_family_is_an_image_classifier() -> None:
    from PIL import Image

    request = plan_request("clf", config(TEXT_ENSEMBLE.replace('"TEXT"', '"IMAGE"')), "image-classification")
    image = Image.open(io.BytesIO(request.inputs["IMAGE"].ravel()[0]))
    assert request.kind == RequestKind.FAMILY and image.format == "JPEG" and image.size[0] > 100


def test_plan_request_prefers_input_files_over_the_family_sample_when_given(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_bytes(b"first review")
    (tmp_path / "b.txt").write_bytes(b"second review")
    files = (parse_input_file(f"TEXT={tmp_path / 'a.txt'}"), parse_input_file(f"clf:TEXT={tmp_path / 'b.txt'}"))
    request = plan_request("clf", config(), "text-classification", files)
    assert request.kind == RequestKind.FILES and request.check is None
    assert request.inputs["TEXT"].ravel().tolist() == [b"first review", b"second review"]
    other = plan_request("other", config(), None, files[1:])  # clf:TEXT is not for "other"
    assert other.kind == RequestKind.SYNTHESIZED and not other.real


def test_plan_request_synthesizes_when_the_task_is_unknown() -> None:
    request = plan_request("clf", config(), "token-classification")  # no sample registered (yet)
    assert request.kind == RequestKind.SYNTHESIZED and request.batch == 1


def test_check_answer_passes_when_names_dtypes_and_shapes_match() -> None:
    assert check_answer(config(), answer(), 3) is None


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda a: a.pop("SCORES"), "no output 'SCORES'"),
        (lambda a: a.__setitem__("SCORES", a["SCORES"].astype(np.float64)), "'SCORES' is float64, the config declares TYPE_FP32"),
        (lambda a: a.__setitem__("CLASS_IDS", a["CLASS_IDS"][:, :2]), "'CLASS_IDS' has shape [3, 2], the config declares [3, 3]"),
        (lambda a: a.__setitem__("LABELS", np.zeros((3, 3), dtype=np.int32)), "'LABELS' is int32, the config declares TYPE_STRING"),
    ],
)
def test_check_answer_names_the_output_when_it_differs_from_the_config(change: Callable[[dict[str, np.ndarray]], object], expected: str) -> None:
    wrong = answer()
    change(wrong)
    problem = check_answer(config(), wrong, 3)
    assert problem is not None and expected in problem


def test_check_classification_passes_when_scores_are_probabilities_best_first() -> None:
    assert check_classification(answer()) is None


@pytest.mark.parametrize(
    ("scores", "ids", "expected"),
    [
        ([0.5, 0.3, 0.4], None, "not sorted"),
        ([1.7, 0.2, 0.1], None, "not probabilities"),
        ([0.4, 0.3, 0.2], [0, 1, 2], "sum to 0.9000, not 1"),  # top-3 of 3 classes must sum to 1
        ([0.7, 0.2, 0.1], [1, 1, 0], "not distinct"),
    ],
)
def test_check_classification_says_why_when_scores_are_not_class_probabilities(scores: list[float], ids: list[int] | None, expected: str) -> None:
    problem = check_classification(answer(scores=scores, ids=ids))
    assert problem is not None and expected in problem


def test_recorded_tasks_reads_each_ensembles_latest_task_when_the_manifest_has_them(tmp_path: Path) -> None:
    def entry(role: str, tasks: dict[str, str]) -> dict:
        return {"role": role, "versions": {v: {"settings": {"pipeline": t}} for v, t in tasks.items()}}

    models = {
        "clf": entry("ensemble", {"1": "text-classification", "2": "image-classification", "10": "text-classification"}),
        "clf_model": entry("model", {"1": "text-classification"}),
    }
    (tmp_path / "repo-builder.json").write_text(json.dumps({"format": 1, "models": models}))
    assert recorded_tasks(tmp_path) == {"clf": "text-classification"}  # version 10 is the latest, not "2"


@pytest.mark.parametrize("content", [None, "not json", '{"models": []}', '["x"]'])
def test_recorded_tasks_is_empty_when_the_manifest_is_missing_or_malformed(tmp_path: Path, content: str | None) -> None:
    if content is not None:
        (tmp_path / "repo-builder.json").write_text(content)
    assert recorded_tasks(tmp_path) == {}


SERVER_MESSAGE = (
    "in ensemble 'clf', Failed to process the request(s) for model 'clf_post_0_0', message: AttributeError: "
    "'numpy.ndarray' object has no attribute 'maxx' At: /tmp/repo-builder-live-x1/repository/clf_post/1/model.py(33): "
    "execute /usr/lib/python3/numpy/core/_methods.py(41): _amax"
)


def test_failing_step_points_at_the_users_file_and_line_when_the_stage_copy_ran_it() -> None:
    assert failing_step(SERVER_MESSAGE, {"clf", "clf_post"}) == ("clf_post/1/model.py", 33)
    mapped = repository_frames(SERVER_MESSAGE, {"clf", "clf_post"})
    assert "/tmp/repo-builder-live" not in mapped and "At: clf_post/1/model.py(33): execute" in mapped


def test_failing_step_is_none_when_no_frame_lies_in_a_model_folder() -> None:
    assert failing_step("in ensemble 'clf', request timed out", {"clf"}) is None
    assert failing_step("At: /usr/lib/python3/x.py(3): f", {"clf"}) is None


def _report(*diagnostics: Diagnostic) -> Report:
    repository = Repository(root=Path("/r"), models=())
    return Report(repository, tuple(diagnostics), (ModelSummary("clf", True, (1,), "ensemble"),))


def test_summary_line_says_not_proven_when_a_synthesized_request_failed() -> None:
    warned = Diagnostic("RB903", "live-inference-failed", Severity.WARNING, "did not answer", "clf/config.pbtxt", "clf")
    line = summary_line(_report(warned))
    assert line.startswith("OK: ") and "not proven: 1 ensemble(s) did not answer" in line and "--fail-on warning" in line
    assert "not proven" not in summary_line(_report())


def test_render_junit_names_the_most_severe_finding_when_a_warning_comes_first() -> None:
    warning = Diagnostic("RB002", "built-file-changed", Severity.WARNING, "changed", "clf/1/model.py", "clf")
    error = Diagnostic("RB903", "live-inference-failed", Severity.ERROR, "did not answer", "clf_post/1/model.py", "clf")
    xml = render_report(_report(warning, error), "junit", settings=RenderSettings(fail_on=Severity.WARNING))
    failure = ET.fromstring(xml).find(".//failure")
    assert failure is not None and (failure.get("type"), failure.get("message")) == ("RB903", "did not answer")
