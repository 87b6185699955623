"""The phases every exporter goes through, in the same order and with the same progress lines: trace to ONNX and
check the file, compare it with PyTorch in ONNX Runtime, build and write ``signature.json`` (last, into
the staging folder), and name what ended up in the output folder."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from repo_builder.export.exporter import export_module
from repo_builder.export.onnx_reader import check_onnx
from repo_builder.export.parity import Inputs, Reference, run_parity
from repo_builder.export.progress import Phases
from repo_builder.export.signature_build import ONNX_FILE, build_signature
from repo_builder.spec import SIGNATURE_FILE, OnnxArtifact, ParityResult, Signature, write_signature


def export_checked(
    phases: Phases,
    module: Any,
    example_inputs: Sequence[Any],
    onnx_path: Path,
    *,
    input_names: Sequence[str],
    output_names: Sequence[str],
    dynamic_axes: Mapping[str, Mapping[int, str]],
    opset: int,
) -> None:
    """``export_module`` then ``onnx.checker``, as one progress step."""
    with phases.phase(f"exporting ONNX (opset {opset})"):
        export_module(
            module,
            example_inputs,
            onnx_path,
            input_names=input_names,
            output_names=output_names,
            dynamic_axes=dynamic_axes,
            opset=opset,
        )
        check_onnx(onnx_path)


def check_parity_phase(
    phases: Phases, onnx_path: Path, reference: Reference, cases: Sequence[Inputs], tolerance: float
) -> tuple[ParityResult, ...]:
    """``run_parity`` over every case, as one progress step; the first failing shape raises."""
    with phases.phase(f"checking parity with ONNX Runtime ({len(cases)} shapes)"):
        return run_parity(onnx_path, reference, cases, tolerance=tolerance)


def write_export_signature(
    staging: Path,
    onnx_path: Path,
    dynamic_axes: Mapping[str, Mapping[int, str]],
    metadata: Mapping[str, Any],
    parity: Sequence[ParityResult],
) -> Signature:
    """Read the file's IO back into a Signature (checking the dynamic axes) and write it into ``staging``."""
    signature = build_signature(onnx_path, intended_axes=dynamic_axes, metadata=metadata, parity=parity)
    write_signature(signature, staging)
    return signature


def exported_artifact(
    out_dir: Path, signature: Signature, labels: tuple[str, ...], tokenizer_dir: str | None = None
) -> OnnxArtifact:
    """Where the staged files are once renamed into ``out_dir``."""
    out_dir = Path(out_dir)
    return OnnxArtifact(
        onnx_path=out_dir / ONNX_FILE,
        signature_path=out_dir / SIGNATURE_FILE,
        signature=signature,
        tokenizer_dir=out_dir / tokenizer_dir if tokenizer_dir is not None else None,
        labels=labels,
    )
