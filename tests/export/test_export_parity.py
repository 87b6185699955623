"""The parity check: error measures, a deliberately broken comparison failing, generated inputs."""

from __future__ import annotations

import math

import numpy as np
import pytest

from repo_builder.errors import UserError
from repo_builder.export.parity import compare_outputs, image_cases, run_parity, text_cases
from repo_builder.spec import OnnxArtifact


def test_compare_outputs_passes_when_errors_are_within_tolerance() -> None:
    want = np.array([[1.0, -2.0, 0.5]], dtype=np.float32)
    max_abs, max_rel, passed = compare_outputs([want], [want + np.float32(5e-5)], 1e-4)
    assert passed and max_abs == pytest.approx(5e-5, rel=1e-2) and max_rel == pytest.approx(2.5e-5, rel=1e-2)


def test_compare_outputs_fails_when_absolute_and_relative_errors_exceed_tolerance() -> None:
    want = np.array([1.0, 2.0], dtype=np.float32)
    max_abs, max_rel, passed = compare_outputs([want], [want + np.float32(1e-3)], 1e-4)
    assert (
        not passed and max_abs == pytest.approx(1e-3, rel=1e-3) and max_rel == pytest.approx(5e-4, rel=1e-3)
    )


def test_compare_outputs_passes_when_large_logits_match_relatively() -> None:
    want = np.array([300.0, -250.0], dtype=np.float32)
    _, max_rel, passed = compare_outputs([want], [want + np.float32(3e-3)], 1e-4)
    assert passed and max_rel == pytest.approx(1e-5, rel=1e-2)


@pytest.mark.parametrize(
    "actual",
    [
        [np.array([1.0, np.nan], dtype=np.float32)],
        [np.array([[1.0, 2.0]], dtype=np.float32)],  # wrong shape
        [np.array([1.0, 2.0], dtype=np.float32)] * 2,  # wrong output count
    ],
)
def test_compare_outputs_fails_when_outputs_are_nan_or_misshapen(actual: list[np.ndarray]) -> None:
    max_abs, _, passed = compare_outputs([np.array([1.0, 2.0], dtype=np.float32)], actual, 1e-4)
    assert not passed and (math.isnan(max_abs) or math.isinf(max_abs))


def test_run_parity_fails_naming_the_shape_when_the_reference_is_broken(
    tiny_bert_export: OnnxArtifact,
) -> None:
    names = [t.name for t in tiny_bert_export.signature.inputs]
    cases = text_cases(names, [(2, 8), (3, 5)], vocab_size=50)
    session_outputs: list[np.ndarray] = []

    def honest(case: dict[str, np.ndarray]) -> list[np.ndarray]:
        from repo_builder.export.parity import open_session

        out = open_session(tiny_bert_export.onnx_path).run(["logits"], dict(case))
        session_outputs.append(out[0])
        return out

    results = run_parity(tiny_bert_export.onnx_path, honest, cases)
    assert [r.passed for r in results] == [True, True] and all(r.max_abs_error == 0.0 for r in results)

    def broken(case: dict[str, np.ndarray]) -> list[np.ndarray]:
        return [out + np.float32(0.01) for out in honest(case)]

    with pytest.raises(
        UserError, match=r"at input_ids 2x8, attention_mask 2x8, token_type_ids 2x8: max abs error 0\.01"
    ):
        run_parity(tiny_bert_export.onnx_path, broken, cases)
    recorded = run_parity(tiny_bert_export.onnx_path, broken, cases, fail=False)
    assert [r.passed for r in recorded] == [False, False]
    assert recorded[0].max_abs_error == pytest.approx(0.01, rel=1e-3)


def test_text_cases_pad_rows_after_the_first_when_generated() -> None:
    (case,) = text_cases(["input_ids", "attention_mask", "token_type_ids"], [(16, 9)], vocab_size=30)
    mask = case["attention_mask"]
    assert {a.dtype.name for a in case.values()} == {"int64"} and mask.shape == (16, 9)
    assert mask[0].all() and not mask.all()  # the first row is full, some others padded
    lengths = mask.sum(axis=1)
    assert all((mask[i, : lengths[i]] == 1).all() and (mask[i, lengths[i] :] == 0).all() for i in range(16))
    assert (case["input_ids"] < 30).all() and (case["input_ids"][mask == 0] == 0).all()


def test_run_parity_rejects_the_tolerance_when_it_is_not_positive(tiny_bert_export: OnnxArtifact) -> None:
    with pytest.raises(UserError, match="--tolerance"):
        run_parity(tiny_bert_export.onnx_path, lambda case: [], [], tolerance=0.0)


def test_run_parity_gives_one_line_error_when_onnx_runtime_rejects_a_shape(
    resnet_random: OnnxArtifact,
) -> None:
    cases = image_cases("pixel_values", (1,), [(160, 200)])  # the default export fixes 224x224
    with pytest.raises(UserError, match=r"ONNX Runtime failed at pixel_values 1x3x160x200") as info:
        run_parity(resnet_random.onnx_path, lambda case: [], cases)
    assert "\n" not in str(info.value)
