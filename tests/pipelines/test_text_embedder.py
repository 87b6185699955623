"""build/export text-embedder on tiny sentence-transformers folders: the checkpoint's own pooling read, every
pooling fused into the graph as sentence-transformers computes it, the repository served end to end on the
embedded Triton and matched against SentenceTransformer.encode on 200 texts (issue 19)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from repo_builder.cli.main import main
from repo_builder.errors import UserError
from repo_builder.export.embedder_checkpoint import read_embedder_checkpoint
from repo_builder.export.text_embedder import export_text_embedder
from repo_builder.export.tiny_embedder import make_tiny_sentence_transformer
from repo_builder.export.tiny_models import make_tiny_text_classifier
from repo_builder.pipelines.reference import check_reference
from repo_builder.pipelines.text_embedding import reference_texts, sentence_transformer

pytest.importorskip("sentence_transformers")


@pytest.fixture(scope="module")
def tiny_st(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_sentence_transformer(tmp_path_factory.mktemp("st") / "tiny", max_seq_length=48)


@pytest.fixture(scope="module")
def bare_encoder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_text_classifier(tmp_path_factory.mktemp("enc") / "bert", seed=2, with_head=False)


def _build(argv: list[str], capsys: Any) -> tuple[int, dict[str, Any]]:
    capsys.readouterr()
    code = main(["build", "text-embedder", *argv, "--format", "json", "-q"])
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err, captured.err
    return code, (json.loads(captured.out) if captured.out.strip() else {"err": captured.err})


def _error(argv: list[str], capsys: Any) -> str:
    capsys.readouterr()
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: ") and err.count("\n") == 1, err
    return err


# --- the checkpoint's own modules --------------------------------------------------------------------------

def test_checkpoint_reads_pooling_normalize_and_length_when_sentence_transformers_folder(tiny_st: Path) -> None:
    found = read_embedder_checkpoint(tiny_st)
    assert (found.pooling, found.normalize, found.max_length, found.origin) == ("mean", True, 48, "sentence-transformers")


def test_checkpoint_refuses_encoder_when_no_pooling_given(bare_encoder: Path) -> None:
    with pytest.raises(UserError, match="--pooling mean"):
        read_embedder_checkpoint(bare_encoder)
    assert read_embedder_checkpoint(bare_encoder, pooling="cls", normalize=True).origin == "options"


def test_checkpoint_refuses_options_when_they_contradict_the_folder(tiny_st: Path, tmp_path: Path) -> None:
    with pytest.raises(UserError, match="pools with 'mean'"):
        read_embedder_checkpoint(tiny_st, pooling="cls")
    plain = tmp_path / "plain"
    shutil.copytree(tiny_st, plain)
    modules = json.loads((plain / "modules.json").read_text())
    (plain / "modules.json").write_text(json.dumps(modules[:2]))  # no Normalize module
    with pytest.raises(UserError, match="no Normalize module"):
        read_embedder_checkpoint(plain, normalize=True)


def test_checkpoint_refuses_module_when_not_transformer_pooling_normalize(tiny_st: Path, tmp_path: Path) -> None:
    dense = tmp_path / "dense"
    shutil.copytree(tiny_st, dense)
    modules = json.loads((dense / "modules.json").read_text())
    modules.insert(2, {"idx": 2, "name": "2", "path": "2_Dense", "type": "sentence_transformers.models.Dense"})
    (dense / "modules.json").write_text(json.dumps(modules))
    with pytest.raises(UserError, match="Dense is not supported"):
        read_embedder_checkpoint(dense)
    (dense / "modules.json").write_text("[")
    with pytest.raises(UserError, match="not readable JSON"):
        read_embedder_checkpoint(dense)


# --- every pooling fused in the graph, against sentence-transformers ---------------------------------------

def _onnx_embeddings(export: Path, texts: list[str], max_length: int) -> np.ndarray:
    import onnxruntime as ort
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(export / "tokenizer" / "tokenizer.json"))
    tokenizer.enable_truncation(max_length=max_length)
    tokenizer.enable_padding(pad_id=0, pad_token="[PAD]", pad_to_multiple_of=8)  # as the preprocessing step pads
    encodings = tokenizer.encode_batch(texts)
    session = ort.InferenceSession(str(export / "model.onnx"), providers=["CPUExecutionProvider"])
    fields = {"input_ids": "ids", "attention_mask": "attention_mask", "token_type_ids": "type_ids"}
    feeds = {i.name: np.array([getattr(e, fields[i.name]) for e in encodings], dtype=np.int64) for i in session.get_inputs()}
    return session.run(None, feeds)[0]


@pytest.mark.parametrize(("pooling", "normalize"), [("mean", False), ("cls", True), ("max", False), ("lasttoken", True)])
def test_export_matches_sentence_transformers_when_pooling_is_fused(bare_encoder: Path, tmp_path: Path, pooling: str, normalize: bool) -> None:
    checkpoint = read_embedder_checkpoint(bare_encoder, pooling=pooling, normalize=normalize)
    artifact = export_text_embedder(checkpoint, tmp_path / "export", max_length=32)
    assert artifact.signature.metadata["embedding"] | {"pooling": pooling} == artifact.signature.metadata["embedding"]
    texts = reference_texts(40)
    got = _onnx_embeddings(tmp_path / "export", texts, 32)
    want = sentence_transformer(bare_encoder, {"pooling": pooling, "normalize": normalize, "max_length": 32}).encode(texts, batch_size=7)
    assert got.shape == want.shape == (40, 32)
    assert np.abs(got - want).max() <= 1e-4
    norms = np.linalg.norm(got, axis=1)
    assert np.allclose(norms, 1.0, atol=1e-5) == normalize


# --- built, served on the embedded Triton, judged by SentenceTransformer.encode ----------------------------

@pytest.fixture(scope="module")
def built(tiny_st: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    repo = tmp_path_factory.mktemp("built") / "repo"
    code = main(["build", "text-embedder", "--model", str(tiny_st), "--out", str(repo), "--runtime", "python",
                 "--live", "--format", "json", "-q"])
    assert code == 0
    return repo, json.loads((repo / "repo-builder.json").read_text())


def test_build_passes_live_and_records_pooling_when_sentence_transformers_folder(built: tuple[Path, dict[str, Any]]) -> None:
    repo, manifest = built
    assert sorted(p.name for p in repo.iterdir() if p.is_dir()) == ["text_embedder", "text_embedder_model", "text_embedder_preprocess"]
    config = (repo / "text_embedder" / "config.pbtxt").read_text()
    assert 'name: "EMBEDDING"' in config and "TYPE_FP32" in config and "dims: [ 32 ]" in config
    readme = (repo / "text_embedder" / "1" / "README.md").read_text()
    assert "mean pooling, L2-normalized" in readme and "48 tokens" in readme and "fused" in readme
    recorded = json.loads((repo / "text_embedder" / "1" / "signature.json").read_text())["metadata"]
    assert recorded["embedding"] | {"pooling": "mean", "normalize": True, "fused": "onnx-graph"} == recorded["embedding"]
    assert recorded["preprocess"]["max_length"] == 48
    settings = manifest["models"]["text_embedder"]["versions"]["1"]["settings"]
    assert (settings["family"], settings["pooling"], settings["normalize"]) == ("text-embedder", "mean", True)


def test_reference_check_passes_on_200_texts_when_served_end_to_end(built: tuple[Path, dict[str, Any]]) -> None:
    report = check_reference(built[0], minimum_cases=200)
    assert report.passed, report.failures
    assert report.cases >= 200
    assert report.figures["min_cosine"] >= 0.9999 and report.figures["max_abs_diff"] <= 1e-4


def test_reference_check_fails_when_compared_with_another_checkpoint(built: tuple[Path, dict[str, Any]], tmp_path: Path) -> None:
    other = make_tiny_sentence_transformer(tmp_path / "other", seed=7, max_seq_length=48)
    report = check_reference(built[0], model=other, minimum_cases=30)
    assert not report.passed and report.failures and report.figures["min_cosine"] < 0.9999


def test_build_serves_fp16_vectors_within_fp16_bounds_when_output_dtype_fp16(tiny_st: Path, tmp_path: Path, capsys: Any) -> None:
    repo = tmp_path / "repo"
    # onnxruntime: --live and the reference check serve the model step through the embedded Triton's stand-in.
    code, summary = _build(["--model", str(tiny_st), "--out", str(repo), "--runtime", "onnxruntime", "--output-dtype", "fp16", "--live"],
                           capsys)
    assert code == 0 and summary["validation"]["ok"] is True, summary
    assert "TYPE_FP16" in (repo / "text_embedder" / "config.pbtxt").read_text()
    report = check_reference(repo, minimum_cases=200)
    assert report.passed, report.failures
    assert report.bounds["max_abs_diff"] == "<= 0.002"


def test_build_defers_tensorrt_with_profiles_from_the_tokenizer_length_when_deferred(tiny_st: Path, tmp_path: Path, capsys: Any) -> None:
    from repo_builder.compile_recipe import read_recipe

    repo = tmp_path / "repo"
    code, summary = _build(["--model", str(tiny_st), "--out", str(repo), "--runtime", "tensorrt", "--defer-compile", "--no-parity"], capsys)
    assert code == 0 and summary["pending_compile"] is True, summary
    recipe = read_recipe(repo / "text_embedder_model" / "1" / "compile.json")
    assert recipe.profiles[0]["input_ids"].max == (8, 48) and recipe.profiles[0]["attention_mask"].max == (8, 48)


def test_export_then_build_from_export_passes_when_cli_used(tiny_st: Path, tmp_path: Path, capsys: Any) -> None:
    export = tmp_path / "export"
    assert main(["export", "text-embedder", "--model", str(tiny_st), "--out", str(export), "-q"]) == 0
    assert json.loads((export / "signature.json").read_text())["metadata"]["embedding"]["pooling"] == "mean"
    code, summary = _build(["--from-export", str(export), "--out", str(tmp_path / "repo"), "--runtime", "python"], capsys)
    assert code == 0 and summary["validation"]["ok"] is True, summary


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["build", "text-embedder"], "needs --model"),
        (["build", "text-embedder", "--model", "{enc}"], "--pooling mean"),
        (["build", "text-embedder", "--model", "{st}", "--labels", "{st}/modules.json"], "--labels"),
        (["build", "text-embedder", "--model", "{st}", "--pooling", "max"], "drop --pooling"),
        (["build", "text-embedder", "--model", "{st}", "--max-length", "0"], "--max-length"),
        (["export", "text-embedder", "--model", "{tmp}/missing"], "no such folder"),
    ],
)
def test_text_embedder_refuses_in_one_line_when_input_is_bad(argv: list[str], says: str, tiny_st: Path, bare_encoder: Path,
                                                               tmp_path: Path, capsys: Any) -> None:
    out = tmp_path / "out"
    args = [a.format(st=tiny_st, enc=bare_encoder, tmp=tmp_path) for a in argv] + ["--out", str(out)]
    assert says in _error(args, capsys)
    assert not out.exists()


def test_bench_reports_served_texts_beside_sentence_transformers_when_reference_asked(built: tuple[Path, dict[str, Any]], tmp_path: Path,
                                                                                       capsys: Any) -> None:
    figures = tmp_path / "bench.json"
    capsys.readouterr()
    code = main(["bench", str(built[0]), "--reference", "--concurrency", "1,4", "--seconds", "0.5", "--warmup", "0.2",
                 "--threads", "1", "--json", str(figures)])
    out = capsys.readouterr().out
    assert code == 0, out
    reference = json.loads(figures.read_text())["models"][0]["reference"]
    assert reference["family"] == "text-embedder" and reference["in_process"]["threads"] == 1
    assert reference["in_process"]["best_items_per_s"] > 0 and reference["in_process"]["p99_ms"] >= reference["in_process"]["p50_ms"] > 0
    assert set(reference["served_over_in_process"]) == {"1", "4"} and all(r > 0 for r in reference["served_over_in_process"].values())
    assert "served at concurrency 4:" in out and "texts/s" in out


def test_bench_refuses_reference_options_when_reference_not_asked(built: tuple[Path, dict[str, Any]], capsys: Any) -> None:
    assert "--reference" in _error(["bench", str(built[0]), "--threads", "2"], capsys)
