"""Trace a wrapped Hugging Face text model to ONNX and check it against PyTorch, as the text exporters
(classifier, token classifier, embedder) all do: traced at a padded example, parity over parity_shapes."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from repo_builder.export.flow import check_parity_phase, export_checked
from repo_builder.export.hf_checkpoint import HEAD_SEED, TRACE_SHAPE, parity_shapes
from repo_builder.export.parity import PARITY_SEED, text_cases, torch_reference
from repo_builder.export.progress import Phases
from repo_builder.spec import ParityResult


@dataclass(frozen=True)
class TextGraph:
    """The graph's names and axes, and the token ranges its example inputs are drawn from."""

    input_names: tuple[str, ...]
    output_name: str
    dynamic_axes: dict[str, dict[int, str]]
    max_length: int
    vocab_size: int
    type_vocab_size: int
    pad_token_id: int


def text_graph(
    config: Any, tokenizer: Any, input_names: list[str], output_name: str, output_axes: dict[int, str], max_length: int
) -> TextGraph:
    """Batch and sequence axes on every input; ``output_axes`` on the one output."""
    return TextGraph(
        input_names=tuple(input_names),
        output_name=output_name,
        dynamic_axes={name: {0: "batch", 1: "sequence"} for name in input_names} | {output_name: output_axes},
        max_length=max_length,
        vocab_size=int(getattr(config, "vocab_size", 0) or len(tokenizer)),
        type_vocab_size=int(getattr(config, "type_vocab_size", 2) or 1),
        pad_token_id=int(tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0),
    )


def export_text_graph(
    phases: Phases, torch: Any, wrapper: Any, graph: TextGraph, onnx_path: Path, *, opset: int, check_parity: bool,
    tolerance: float,
) -> tuple[ParityResult, ...]:
    """Export ``wrapper`` to ``onnx_path``; the parity results (none when ``check_parity`` is off)."""
    names = list(graph.input_names)
    # Traced with a padded second row so no "mask is all ones" shortcut can be frozen into the graph.
    (example,) = _cases(graph, [(TRACE_SHAPE[0], min(TRACE_SHAPE[1], graph.max_length))], HEAD_SEED)
    export_checked(
        phases, wrapper, [torch.from_numpy(example[name]) for name in names], onnx_path,
        input_names=names, output_names=[graph.output_name], dynamic_axes=graph.dynamic_axes, opset=opset,
    )
    if not check_parity:
        return ()
    cases = _cases(graph, parity_shapes(graph.max_length), PARITY_SEED)
    return check_parity_phase(phases, onnx_path, torch_reference(wrapper, names), cases, tolerance)


def _cases(graph: TextGraph, shapes: list[tuple[int, int]], seed: int) -> list[dict[str, np.ndarray]]:
    return text_cases(
        graph.input_names, shapes, vocab_size=graph.vocab_size, type_vocab_size=graph.type_vocab_size,
        pad_token_id=graph.pad_token_id, seed=seed,
    )
