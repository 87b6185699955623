"""build token-classifier end to end: export once, one ensemble per aggregation strategy, served on the embedded
Triton and compared with transformers' own token-classification pipeline on the same checkpoint (>= 200 texts:
entity lists identical in labels, offsets and words, scores within 1e-4); long texts refused or truncated;
headless and other-task checkpoints refused; a deferred TensorRT build sized from the tokenizer's maximum length.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from repo_builder.cli.main import main
from repo_builder.pipelines.family import ReferenceRun
from repo_builder.pipelines.reference import built_ensemble
from repo_builder.pipelines.token_classification import REFERENCE
from repo_builder.pipelines.token_reference import entities_request, long_texts

pytestmark = [pytest.mark.triton, pytest.mark.slow]
AGGREGATIONS = ("none", "simple", "first", "average", "max")
MAX_LENGTH = 128  # the tiny model's


@pytest.fixture(scope="module")
def ner_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from repo_builder.export.tiny_token_classifier import make_tiny_token_classifier

    return make_tiny_token_classifier(tmp_path_factory.mktemp("tiny-ner") / "ner")


@pytest.fixture(scope="module")
def ner_export(ner_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("ner-export") / "out"
    assert main(["export", "token-classifier", "--model", str(ner_dir), "--out", str(out), "-q"]) == 0
    return out


def build(argv: list[str]) -> int:
    return main(["build", "token-classifier", "--runtime", "python", "-q", *argv])


@pytest.fixture(scope="module")
def ner_repo(ner_export: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One ensemble per aggregation (built from the export), and one that truncates long texts."""
    repo = tmp_path_factory.mktemp("ner-repo")
    for aggregation in AGGREGATIONS:
        assert build(["--from-export", str(ner_export), "--aggregation", aggregation, "--name", f"ner_{aggregation}", "--out", str(repo)]) == 0
    assert build(["--from-export", str(ner_export), "--long-texts", "truncate", "--ignore-labels", "O,MISC", "--name", "ner_truncate",
                  "--out", str(repo)]) == 0
    return repo


@pytest.fixture(scope="module")
def ner_server(ner_repo: Path) -> Iterator[Any]:
    from repo_builder.triton import start_server

    with start_server(ner_repo, mode="explicit") as server:
        for name in (*AGGREGATIONS, "truncate"):
            server.load(f"ner_{name}")
        yield server


def reference_run(server: Any, repo: Path, name: str, model: Path) -> ReferenceRun:
    built = built_ensemble(repo, name)  # the options as the manifest recorded them
    return ReferenceRun(model, lambda inputs: server.infer(name, inputs, timeout=120.0), built.max_batch_size, 200, built.settings)


@pytest.mark.parametrize("aggregation", AGGREGATIONS)
def test_served_entities_equal_transformers_pipeline_when_built_with_each_aggregation(
    ner_server: Any, ner_repo: Path, ner_dir: Path, aggregation: str
) -> None:
    report = REFERENCE.check(reference_run(ner_server, ner_repo, f"ner_{aggregation}", ner_dir))
    assert report.passed, report.to_json()
    assert report.cases >= 200 and report.figures["entities"] > report.cases  # random weights: many entities compared
    assert report.figures["max_score_diff"] <= 1e-4
    assert report.figures["refused_long_texts"] == 2  # --long-texts refuse (the default)


def test_served_entities_equal_truncating_pipeline_when_built_with_long_texts_truncate(ner_server: Any, ner_repo: Path, ner_dir: Path) -> None:
    report = REFERENCE.check(reference_run(ner_server, ner_repo, "ner_truncate", ner_dir))
    assert report.passed, report.to_json()
    assert report.cases == 205  # the 200 texts and 5 far over the maximum length, cut as the pipeline cuts them


def test_ensemble_refuses_only_the_long_request_when_long_texts_refused(ner_server: Any) -> None:
    with pytest.raises(Exception, match=f"longer than {MAX_LENGTH} tokens"):
        ner_server.infer("ner_simple", entities_request(["short", long_texts(1)[0]]))
    out = ner_server.infer("ner_simple", entities_request(["Marie Curie lives in Paris"]))
    assert isinstance(json.loads(out["entities"][0][0]), list)


def test_ensemble_returns_pipeline_keys_when_aggregation_none(ner_server: Any) -> None:
    out = ner_server.infer("ner_none", entities_request(["Marie Curie", ""]))
    first, empty = (json.loads(row[0]) for row in out["entities"])
    assert empty == [] and first
    assert list(first[0]) == ["entity", "score", "index", "word", "start", "end"]


def test_preprocess_carries_offsets_and_special_tokens_mask_when_batch_is_padded(ner_server: Any) -> None:
    texts = np.array([[b"the fox"], [b"a much longer text than the first"]], dtype=np.object_)
    out = ner_server.infer("ner_simple_preprocess", {"TEXT": texts})
    assert out["OFFSETS"].shape == (*out["input_ids"].shape, 2) and out["input_ids"].shape[1] % 8 == 0
    assert out["SPECIAL_TOKENS_MASK"][0].tolist()[:4] == [1, 0, 0, 1] and out["SPECIAL_TOKENS_MASK"][0, 4:].all()  # [CLS] the fox [SEP] pad
    assert out["OFFSETS"][0, 1].tolist() == [0, 3] and out["OFFSETS"][0, 2].tolist() == [4, 7] and out["TEXTS"][1, 0] == texts[1, 0]


def test_build_live_proves_every_model_when_built_from_the_checkpoint(ner_dir: Path, tmp_path: Path, capsys: Any) -> None:
    capsys.readouterr()
    code = main(["build", "token-classifier", "--model", str(ner_dir), "--runtime", "python", "--out", str(tmp_path),
                 "--aggregation", "average", "--live", "--format", "json", "-q"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    live = json.loads(captured.out)["validation"]["live"]
    assert set(live) == {"ner", "ner_preprocess", "ner_model", "ner_postprocess"}
    assert all(v["loaded"] for v in live.values()) and live["ner"]["inferred"] is True
    settings = json.loads((tmp_path / "repo-builder.json").read_text())["models"]["ner"]["versions"]["1"]["settings"]
    assert settings["aggregation"] == "average" and settings["family"] == "token-classifier"
    assert "aggregation_strategy='average'" in (tmp_path / "ner" / "1" / "README.md").read_text()


def test_build_refuses_headless_encoder_in_one_line_when_checkpoint_has_no_token_head(tmp_path: Path, capsys: Any) -> None:
    from repo_builder.export.tiny_models import make_tiny_text_classifier

    bare = make_tiny_text_classifier(tmp_path / "bare", seed=3, with_head=False)
    capsys.readouterr()
    code = main(["build", "token-classifier", "--model", str(bare), "--runtime", "python", "--out", str(tmp_path / "repo"), "-q"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: --model") and "not a token classifier" in err and err.count("\n") == 1, err
    assert not (tmp_path / "repo").exists() or not any(p.name.startswith("ner") for p in (tmp_path / "repo").iterdir())


def test_build_refuses_sequence_classifier_when_given_as_token_classifier(tmp_path: Path, capsys: Any) -> None:
    from repo_builder.export.tiny_models import make_tiny_text_classifier

    sequence = make_tiny_text_classifier(tmp_path / "seq", seed=3)
    capsys.readouterr()
    code = main(["build", "token-classifier", "--model", str(sequence), "--runtime", "python", "--out", str(tmp_path / "repo"), "-q"])
    err = capsys.readouterr().err
    assert code == 2 and "BertForSequenceClassification" in err, err


def test_build_refuses_unknown_aggregation_when_given(ner_export: Path, tmp_path: Path, capsys: Any) -> None:
    code = build(["--from-export", str(ner_export), "--aggregation", "mean", "--out", str(tmp_path / "repo")])
    assert code == 2 and "mean" in capsys.readouterr().err


def test_deferred_tensorrt_build_sizes_sequence_profiles_from_tokenizer_max_length(ner_export: Path, tmp_path: Path, capsys: Any) -> None:
    repo = tmp_path / "repo"
    code = main(["build", "token-classifier", "--from-export", str(ner_export), "--runtime", "tensorrt", "--defer-compile",
                 "--out", str(repo), "-q", "--format", "json"])
    summary = json.loads(capsys.readouterr().out)
    assert code == 0 and summary["pending_compile"] is True
    recipe = json.loads(next((repo / "ner_model").rglob("compile.json")).read_text())
    (profile,) = recipe["profiles"]
    for name in ("input_ids", "attention_mask", "token_type_ids"):  # the sequence axis up to the tokenizer's maximum
        assert profile[name]["min"] == [1, 1] and profile[name]["max"] == [8, MAX_LENGTH], profile
    assert main(["validate", str(repo), "--allow-pending", "--gpu"]) == 0


def test_reference_runner_passes_when_checking_a_built_ner_ensemble(ner_repo: Path, ner_dir: Path) -> None:
    from repo_builder.pipelines.reference import check_reference

    report = check_reference(ner_repo, model=ner_dir, ensemble="ner_first")  # its own server, options from the manifest
    assert report.passed and report.family == "token-classifier" and report.cases >= 200, report.to_json()


def test_reference_check_fails_when_compared_with_another_checkpoint(ner_server: Any, ner_repo: Path, tmp_path: Path) -> None:
    from repo_builder.export.tiny_token_classifier import make_tiny_token_classifier

    other = make_tiny_token_classifier(tmp_path / "other", seed=1)  # same vocabulary and labels, other weights
    report = REFERENCE.check(reference_run(ner_server, ner_repo, "ner_simple", other))
    assert not report.passed and report.figures["mismatched_texts"] > 0 and report.failures


def test_bench_reports_served_texts_beside_the_pipeline_when_reference_asked(ner_dir: Path, tmp_path: Path, capsys: Any) -> None:
    repo = tmp_path / "repo"
    assert build(["--model", str(ner_dir), "--out", str(repo), "--no-parity"]) == 0
    figures = tmp_path / "bench.json"
    capsys.readouterr()
    code = main(["bench", str(repo), "--reference", "--concurrency", "1,4", "--seconds", "0.5", "--warmup", "0.2",
                 "--threads", "1", "--json", str(figures)])
    out = capsys.readouterr().out
    assert code == 0, out
    reference = json.loads(figures.read_text())["models"][0]["reference"]
    assert reference["family"] == "token-classifier" and reference["in_process"]["threads"] == 1
    assert reference["in_process"]["best_items_per_s"] > 0 and reference["in_process"]["p99_ms"] >= reference["in_process"]["p50_ms"] > 0
    assert set(reference["served_over_in_process"]) == {"1", "4"} and all(r > 0 for r in reference["served_over_in_process"].values())
