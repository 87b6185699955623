"""ONNX Runtime against PyTorch on fresh random inputs at several shapes; errors measured, failures named.

An output passes when its largest absolute error is within the tolerance, either absolutely or relative to
the output's largest magnitude (``max_rel_error``): logits of randomly initialised networks reach the
hundreds, where float32 rounding alone exceeds an absolute 1e-4, while trained logits sit near 1-20.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from repo_builder.errors import UserError, require
from repo_builder.spec import ParityResult

Inputs = Mapping[str, np.ndarray]
Reference = Callable[[Inputs], Sequence[np.ndarray]]

DEFAULT_TOLERANCE = 1e-4
PARITY_SEED = 20261122  # fixed, so signature.json (which records the errors) is reproducible too


def check_tolerance(tolerance: float) -> float:
    if isinstance(tolerance, bool) or not isinstance(tolerance, int | float) or not 0 < tolerance < 1:
        raise UserError(f"--tolerance {tolerance!r}: must be a number between 0 and 1, e.g. 1e-4")
    return float(tolerance)


def compare_outputs(
    expected: Sequence[np.ndarray], actual: Sequence[np.ndarray], tolerance: float
) -> tuple[float, float, bool]:
    """(max absolute error, max relative error, passed) over all outputs; NaN or a shape mismatch fails."""
    if len(expected) != len(actual):
        return float("inf"), float("inf"), False
    max_abs = max_rel = 0.0
    passed = True
    for want, got in zip(expected, actual, strict=True):
        want64, got64 = np.asarray(want, dtype=np.float64), np.asarray(got, dtype=np.float64)
        if want64.shape != got64.shape:
            return float("inf"), float("inf"), False
        if want64.size == 0:
            continue
        abs_err = float(np.max(np.abs(want64 - got64)))
        rel_err = abs_err / max(float(np.max(np.abs(want64))), float(np.finfo(np.float32).tiny))
        if np.isnan(abs_err):
            abs_err = rel_err = float("nan")
        max_abs, max_rel = _nanmax(max_abs, abs_err), _nanmax(max_rel, rel_err)
        passed = passed and (abs_err <= tolerance or rel_err <= tolerance)
    return max_abs, max_rel, passed


def _nanmax(a: float, b: float) -> float:
    return float("nan") if np.isnan(a) or np.isnan(b) else max(a, b)


def describe_shapes(shapes: Mapping[str, Sequence[int]]) -> str:
    return ", ".join(f"{name} {'x'.join(str(d) for d in dims)}" for name, dims in shapes.items())


def open_session(onnx_path: Path) -> Any:
    """An ONNX Runtime CPU session with the default (full) graph optimisations, as Triton's backend uses."""
    ort = require("onnxruntime", "export", "the parity check")
    options = ort.SessionOptions()
    options.log_severity_level = 3  # errors only: its warnings are about CPU-only providers here
    try:
        return ort.InferenceSession(str(onnx_path), sess_options=options, providers=["CPUExecutionProvider"])
    except Exception as exc:  # onnxruntime raises its own Fail/InvalidGraph/NotImplemented types
        raise UserError(
            f"{onnx_path}: ONNX Runtime cannot load the exported model ({_one_line(exc)})"
        ) from None


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return (text[:300] + "...") if len(text) > 300 else (text or type(exc).__name__)


def run_parity(
    onnx_path: Path,
    reference: Reference,
    cases: Iterable[Inputs],
    *,
    tolerance: float = DEFAULT_TOLERANCE,
    fail: bool = True,
) -> tuple[ParityResult, ...]:
    """Run every case through ONNX Runtime and ``reference``; with ``fail``, raise on the first failing shape."""
    tolerance = check_tolerance(tolerance)
    session = open_session(onnx_path)
    output_names = [o.name for o in session.get_outputs()]
    results: list[ParityResult] = []
    for case in cases:
        shapes = {name: tuple(int(d) for d in array.shape) for name, array in case.items()}
        try:
            actual = session.run(output_names, dict(case))
        except Exception as exc:  # e.g. a shape the graph froze at trace time
            raise UserError(
                f"{onnx_path}: ONNX Runtime failed at {describe_shapes(shapes)} ({_one_line(exc)})"
            ) from None
        expected = reference(case)
        max_abs, max_rel, passed = compare_outputs(expected, actual, tolerance)
        results.append(
            ParityResult(shapes=shapes, max_abs_error=max_abs, max_rel_error=max_rel, passed=passed)
        )
        if fail and not passed:
            raise UserError(
                f"{onnx_path}: ONNX Runtime differs from PyTorch at {describe_shapes(shapes)}: "
                f"max abs error {max_abs:.3g}, max rel error {max_rel:.3g}, tolerance {tolerance:g}"
            )
    return tuple(results)


def torch_reference(module: Any, input_names: Sequence[str]) -> Reference:
    """Call ``module`` (eval mode) positionally in ``input_names`` order; outputs as numpy arrays."""
    torch = require("torch", "export", "the parity check")

    def reference(case: Inputs) -> list[np.ndarray]:
        module.eval()
        with torch.no_grad():
            out = module(*(torch.from_numpy(np.ascontiguousarray(case[name])) for name in input_names))
        outputs = out if isinstance(out, tuple | list) else (out,)
        return [o.detach().cpu().numpy() for o in outputs]

    return reference


def image_cases(
    input_name: str, batch_sizes: Sequence[int], sizes: Sequence[tuple[int, int]], *, seed: int = PARITY_SEED
) -> list[dict[str, np.ndarray]]:
    """Normalised-image-like float32 NCHW inputs; every batch size meets every (height, width)."""
    rng = np.random.default_rng(seed)
    return [
        {input_name: rng.standard_normal((batch, 3, height, width), dtype=np.float32)}
        for height, width in sizes
        for batch in batch_sizes
    ]


def text_cases(
    input_names: Sequence[str],
    shapes: Sequence[tuple[int, int]],
    *,
    vocab_size: int,
    type_vocab_size: int = 2,
    dtype: str = "int64",
    pad_token_id: int = 0,
    seed: int = PARITY_SEED,
) -> list[dict[str, np.ndarray]]:
    """Token batches of (batch, sequence) shapes; rows after the first are right-padded to random lengths,
    so the attention-mask path is exercised as a tokenizer padding to the longest row would."""
    rng = np.random.default_rng(seed)
    cases: list[dict[str, np.ndarray]] = []
    for batch, length in shapes:
        lengths = np.concatenate([[length], rng.integers(1, length + 1, size=batch - 1)])
        mask = (np.arange(length)[None, :] < lengths[:, None]).astype(dtype)
        arrays = {
            "input_ids": np.where(
                mask == 1, rng.integers(0, vocab_size, size=(batch, length)), pad_token_id
            ).astype(dtype),
            "attention_mask": mask,
            "token_type_ids": (rng.integers(0, max(type_vocab_size, 1), size=(batch, length)) * mask).astype(
                dtype
            ),
        }
        unknown = [n for n in input_names if n not in arrays]
        if unknown:
            raise UserError(f"no parity inputs can be generated for model input(s) {', '.join(unknown)}")
        cases.append({name: arrays[name] for name in input_names})
    return cases
