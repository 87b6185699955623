"""The one place torch.onnx.export is called, with the exporter and opset chosen here and recorded.

Exporter choice: the TorchScript exporter (``torch.onnx.export(..., dynamo=False)``), on purpose.
Measured on this project's 2-core CPU machines with torch 2.14: torch.onnx.export of ResNet50 takes about
1-2 s with it and about 9-10 s with the dynamo exporter (BENCHMARKS.md, scripts/bench/export_resnet50.py);
both match PyTorch to within about 5e-5 (6e-5 on the larger logits of random weights). The dynamo exporter also needs
onnxscript and writes the weights to a separate ``model.onnx.data`` unless told otherwise, which a Triton
model folder would then have to carry. The TorchScript exporter writes one self-contained file whose bytes
are identical for identical inputs (tested), and its ``dynamic_axes`` names become the ONNX ``dim_param``s
that signature.json, TensorRT profiles and Triton configs are derived from. Its limits, and why they do not
bite here: it traces, so data-dependent control flow is frozen at the example shape (parity at several
shapes catches that); it is deprecated upstream, so a future torch without it must switch this module alone.

Opset choice: 17. It is the first opset with a standard ``LayerNormalization`` (one node per transformer
layer instead of a chain of ReduceMean/Sub/Pow/Sqrt/Div that TensorRT and ONNX Runtime must re-fuse), it is
supported by TensorRT 8.6 and later and by every ONNX Runtime in Triton releases since 23.x, and opset 18
only turned reduction/split attributes into inputs, which gains these models nothing.
"""

from __future__ import annotations

import contextlib
import os
import warnings
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from repo_builder.errors import UserError, require

DEFAULT_OPSET = 17
MIN_OPSET = 13  # dynamic-axis Slice/Unsqueeze with tensor inputs; older opsets would need rewrites
EXPORTER = "torch.onnx.export (TorchScript tracer, dynamo=False)"
EXPORTER_WHY = (
    "one self-contained, byte-reproducible file in ~1-2 s for ResNet50 (the dynamo exporter took ~9-10 s, "
    "needs onnxscript and writes a separate .data file); both matched PyTorch within ~5e-5"
)


def check_opset(opset: int) -> int:
    """The opsets the TorchScript exporter of the installed torch can write, else a one-line error."""
    from torch.onnx import _constants

    highest = int(_constants.ONNX_TORCHSCRIPT_EXPORTER_MAX_OPSET)
    if isinstance(opset, bool) or not isinstance(opset, int) or not MIN_OPSET <= opset <= highest:
        raise UserError(
            f"--opset {opset!r}: choose an opset between {MIN_OPSET} and {highest} (default {DEFAULT_OPSET})"
        )
    return opset


def export_module(
    module: Any,
    example_inputs: Sequence[Any],
    path: Path,
    *,
    input_names: Sequence[str],
    output_names: Sequence[str],
    dynamic_axes: Mapping[str, Mapping[int, str]],
    opset: int,
) -> None:
    """Trace ``module`` (already in eval mode) on ``example_inputs`` and write one ONNX file to ``path``.

    Unsupported operators and tracing failures become one-line UserErrors naming the operator.
    """
    torch = require("torch", "export", "ONNX export")
    check_opset(opset)
    module.eval()  # the exporter restores the module's own mode afterwards: it must already be eval
    try:
        with torch.no_grad(), warnings.catch_warnings(), _native_stdout_silenced():
            # TracerWarnings and the exporter's deprecation notice are about our deliberate choice above.
            warnings.simplefilter("ignore")
            torch.onnx.export(
                module,
                tuple(example_inputs),
                str(path),
                dynamo=False,
                export_params=True,
                do_constant_folding=True,
                opset_version=opset,
                input_names=list(input_names),
                output_names=list(output_names),
                dynamic_axes={name: dict(axes) for name, axes in dynamic_axes.items()},
            )
    except torch.onnx.errors.UnsupportedOperatorError as exc:
        raise UserError(
            f"unsupported operator: {_first_line(exc)}; try another --opset or rewrite that op"
        ) from None
    except (torch.onnx.errors.OnnxExporterError, RuntimeError, TypeError, ValueError) as exc:
        raise UserError(f"ONNX export failed: {type(exc).__name__}: {_first_line(exc)}") from None
    module.eval()


@contextlib.contextmanager
def _native_stdout_silenced() -> Iterator[None]:
    """Silence C++ writes to fd 1 while exporting.

    torch 2.14's TorchScript exporter turns its own ONNX log on unconditionally and dumps the whole IR graph
    to stdout when an export fails, which would bury our one-line error.
    """
    import sys

    sys.stdout.flush()
    try:
        saved = os.dup(1)
    except OSError:  # no usable fd 1 (embedded interpreters): nothing to silence
        yield
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 1)
        yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        os.close(devnull)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
