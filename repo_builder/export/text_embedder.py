"""A sentence-transformers folder (or a Hugging Face encoder with --pooling) -> model.onnx + signature.json +
tokenizer/, with pooling and normalization fused into the graph: one ``embedding`` [batch, dim] output.

Fused, the model step hands Triton one small vector per text instead of [batch, sequence, hidden] token
states, and TensorRT builds pooling into the same engine. The pooling code follows sentence-transformers'
``Pooling`` formulas (mask-weighted mean clamped at 1e-9, masked max with -inf, first/last unmasked token)
and ``Normalize`` (x / max(||x||, 1e-12)), so the served vectors match ``SentenceTransformer.encode``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from repo_builder.errors import UserError, require
from repo_builder.export.embedder_checkpoint import OUTPUT_DTYPES, EmbedderCheckpoint
from repo_builder.export.exporter import DEFAULT_OPSET, check_opset
from repo_builder.export.flow import (
    exported_artifact,
    write_export_signature,
)
from repo_builder.export.hf_checkpoint import (
    INPUT_DTYPE,
    PAD_TO_MULTIPLE_OF,
    TOKENIZER_DIR,
    check_model_dir,
    folder_weights_sha256,
    load_config,
    load_tokenizer,
    one_line,
    quiet_transformers,
    resolve_max_length,
    save_tokenizer,
    select_input_names,
)
from repo_builder.export.parity import DEFAULT_TOLERANCE, check_tolerance
from repo_builder.export.progress import Phases
from repo_builder.export.signature_build import ONNX_FILE, package_versions
from repo_builder.export.staging import staged_output
from repo_builder.export.text_graph import export_text_graph, text_graph
from repo_builder.spec import OnnxArtifact

TASK = "text-embedding"
OUTPUT_NAME = "embedding"


def export_text_embedder(
    checkpoint: EmbedderCheckpoint,
    out_dir: Path,
    *,
    opset: int = DEFAULT_OPSET,
    max_length: int | None = None,
    output_dtype: str = "fp32",
    check_parity: bool = True,
    tolerance: float = DEFAULT_TOLERANCE,
    progress: bool = False,
    phases: Phases | None = None,
) -> OnnxArtifact:
    """Export the encoder with pooling (and normalization) fused; dynamic batch and sequence axes."""
    tolerance = check_tolerance(tolerance)
    torch = require("torch", "export", "text-embedder export")
    require("transformers", "export", "text-embedder export")
    opset = check_opset(opset)
    if output_dtype not in OUTPUT_DTYPES:
        raise UserError(f"--output-dtype {output_dtype}: choose one of {', '.join(OUTPUT_DTYPES)}")
    model_dir = check_model_dir(checkpoint.encoder_dir)
    phases = phases or Phases(progress)
    with phases.phase(f"loading {model_dir.name}"):
        config = load_config(model_dir)
        encoder = _load_encoder(model_dir)
        tokenizer = load_tokenizer(model_dir)
    input_names = select_input_names(encoder, tokenizer)
    if "attention_mask" not in input_names:
        raise UserError(f"--model {model_dir}: its tokenizer emits no attention_mask, which pooling needs")
    length = resolve_max_length(config, tokenizer, max_length if max_length is not None else checkpoint.max_length)
    wrapper = _pooled_module(torch, encoder, input_names, checkpoint, output_dtype)
    graph = text_graph(config, tokenizer, input_names, OUTPUT_NAME, {0: "batch"}, length)

    with staged_output(out_dir) as staging:
        onnx_path = staging / ONNX_FILE
        parity = export_text_graph(
            phases, torch, wrapper, graph, onnx_path, opset=opset, check_parity=check_parity, tolerance=tolerance
        )
        save_tokenizer(tokenizer, staging / TOKENIZER_DIR)
        dimension = int(getattr(config, "hidden_size", 0) or 0)
        metadata: dict[str, Any] = {
            "task": TASK,
            "source": {"model_dir": str(model_dir.resolve()), "model_type": getattr(config, "model_type", None),
                       "architecture": type(encoder).__name__, "weights": "local folder"},
            "source_sha256": folder_weights_sha256(model_dir),
            **package_versions("transformers", "tokenizers"),
            "input_dtype": INPUT_DTYPE,
            "parity_tolerance": tolerance,
            # Where pooling and normalization run and where they came from: the repository's README says it too.
            "embedding": {"pooling": checkpoint.pooling, "normalize": checkpoint.normalize, "dimension": dimension,
                          "output_dtype": output_dtype, "fused": "onnx-graph", "from": checkpoint.origin,
                          "output": OUTPUT_NAME},
            "preprocess": {"tokenizer_dir": TOKENIZER_DIR, "max_length": length, "input_names": list(input_names),
                           "pad_to_multiple_of": PAD_TO_MULTIPLE_OF, "padding_side": getattr(tokenizer, "padding_side", "right"),
                           "pad_token_id": tokenizer.pad_token_id, "truncation": True},
        }
        signature = write_export_signature(staging, onnx_path, graph.dynamic_axes, metadata, parity)
    return exported_artifact(out_dir, signature, (), tokenizer_dir=TOKENIZER_DIR)


def _load_encoder(model_dir: Path) -> Any:
    """The bare encoder (AutoModel) in eval mode, eager attention (plain MatMul/Softmax for ORT and TensorRT)."""
    from transformers import AutoModel

    try:
        with quiet_transformers():
            model = AutoModel.from_pretrained(str(model_dir), local_files_only=True, attn_implementation="eager")
    except Exception as exc:  # missing/corrupt weights, unknown architectures: several types
        raise UserError(f"--model {model_dir}: cannot load the encoder ({one_line(exc)})") from None
    return model.eval().float()


def _pooled_module(torch: Any, encoder: Any, input_names: list[str], checkpoint: EmbedderCheckpoint, output_dtype: str) -> Any:
    """encoder -> token states -> pooling -> (normalize) -> [batch, dim], sentence-transformers' formulas."""
    mask_index = input_names.index("attention_mask")
    pooling, normalize = checkpoint.pooling, checkpoint.normalize

    class Pooled(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.encoder = encoder

        def forward(self, *inputs: Any) -> Any:
            states = self.encoder(**dict(zip(input_names, inputs, strict=True)), return_dict=True).last_hidden_state
            mask = inputs[mask_index]
            vector = pool(states, mask)
            if normalize:
                vector = vector / torch.clamp(torch.linalg.vector_norm(vector, dim=1, keepdim=True), min=1e-12)
            return vector.to(torch.float16) if output_dtype == "fp16" else vector

    def pool(states: Any, mask: Any) -> Any:
        hidden = states.shape[-1]
        if pooling == "mean":
            weights = mask.unsqueeze(-1).to(states.dtype)
            return (states * weights).sum(dim=1) / torch.clamp(weights.sum(dim=1), min=1e-9)
        if pooling == "max":
            return states.masked_fill(mask.unsqueeze(-1) == 0, float("-inf")).max(dim=1).values
        if pooling == "cls":  # the first unmasked token (position 0 with right padding)
            first = mask.to(torch.int32).argmax(dim=1)
            return torch.gather(states, 1, first.view(-1, 1, 1).expand(-1, 1, hidden)).squeeze(1)
        # lasttoken: the last unmasked token, as sentence-transformers finds it (flip, first maximum)
        seq_len = states.shape[1]
        values, indices = mask.to(torch.int32).flip(1).max(1)
        indices = torch.where(values == 0, seq_len - 1, indices)
        index = (seq_len - indices - 1).view(-1, 1, 1).expand(-1, 1, hidden)
        return torch.gather(states * mask.unsqueeze(-1).to(states.dtype), 1, index).squeeze(1)

    return Pooled().eval()
