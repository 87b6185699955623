import json
from pathlib import Path

import pytest

from repo_builder.errors import UserError
from repo_builder.spec import (
    ParityResult,
    Profile,
    Signature,
    TensorSpec,
    read_signature,
    write_signature,
)


def _signature() -> Signature:
    return Signature(
        inputs=(TensorSpec("input_ids", "int64", ("batch", "sequence")),),
        outputs=(TensorSpec("logits", "float32", ("batch", 3)),),
        metadata={"task": "text-classification"},
        parity=(ParityResult({"input_ids": (2, 16)}, 1e-6, 1e-5, True),),
    )


def test_signature_round_trips_when_written_and_read(tmp_path: Path) -> None:
    sig = _signature()
    path = write_signature(sig, tmp_path)
    assert path.name == "signature.json"
    assert read_signature(path) == sig
    data = json.loads(path.read_text())
    assert data["inputs"][0]["triton_type"] == "TYPE_INT64"
    assert data["inputs"][0]["onnx_type"] == "INT64"


def test_signature_is_found_when_given_the_onnx_path(tmp_path: Path) -> None:
    write_signature(_signature(), tmp_path)
    assert read_signature(tmp_path / "model.onnx").inputs[0].name == "input_ids"


def test_tensor_triton_dims_drop_batch_and_mark_dynamic_when_rendered() -> None:
    t = TensorSpec("x", "float32", ("batch", 3, "height", 224))
    assert t.triton_dims(0) == (3, -1, 224)
    assert t.triton_dims(None) == (-1, 3, -1, 224)
    assert t.dynamic_axes == {0: "batch", 2: "height"}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("not json", "not a valid signature file"),
        ('{"format": 99}', "unsupported format"),
        ('{"format": 1, "inputs": []}', "not a valid signature file"),
    ],
)
def test_read_signature_raises_one_line_user_error_when_file_is_bad(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "signature.json"
    path.write_text(text)
    with pytest.raises(UserError, match=message) as info:
        read_signature(path)
    assert "\n" not in str(info.value)


def test_read_signature_says_run_export_when_file_is_missing(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="repo-builder export"):
        read_signature(tmp_path / "signature.json")


def test_signature_rejects_duplicates_and_bad_dims_when_created() -> None:
    with pytest.raises(UserError, match="repeated: x"):
        Signature(inputs=(TensorSpec("x", "float32", (1,)),), outputs=(TensorSpec("x", "float32", (1,)),))
    with pytest.raises(UserError, match="dimension 0"):
        TensorSpec("x", "float32", (0,))
    with pytest.raises(UserError, match="no batch axis"):
        Signature(inputs=(TensorSpec("s", "float32", ()),), outputs=(TensorSpec("y", "float32", (1,)),))


def test_profile_replaces_an_input_when_added_twice_and_checks_order() -> None:
    p = Profile().add("x", (1, 3), (4, 3), (8, 3)).add("x", (1, 3), (2, 3), (16, 3))
    assert p.names() == ("x",)
    assert p["x"].max == (16, 3)
    with pytest.raises(UserError, match="min <= opt <= max"):
        Profile().add("x", (4,), (2,), (8,))


def test_read_signature_looks_beside_any_model_file_or_in_a_folder_when_not_given_json(tmp_path: Path) -> None:
    write_signature(_signature(), tmp_path)
    assert read_signature(tmp_path / "model.source.onnx").outputs[0].name == "logits"
    assert read_signature(tmp_path).outputs[0].name == "logits"
    with pytest.raises(UserError, match=r"signature\.json: no signature file"):
        read_signature(tmp_path / "sub" / "notes.txt")
