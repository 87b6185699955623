"""A local Hugging Face token-classification folder -> model.onnx (logits per token) + signature.json + tokenizer/.

Dynamic batch and sequence axes, parity against PyTorch as for the text classifier. signature.json records
what the entity postprocessing needs besides the logits: labels (id2label), the unknown token's id and
whether the tokenizer marks sub-words (a continuing-subword prefix such as ``##``), which decides how
transformers' pipeline groups tokens into words.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from repo_builder.errors import UserError, require
from repo_builder.export.exporter import DEFAULT_OPSET, check_opset
from repo_builder.export.flow import (
    exported_artifact,
    write_export_signature,
)
from repo_builder.export.hf_checkpoint import (
    HEAD_SEED,
    INPUT_DTYPE,
    PAD_TO_MULTIPLE_OF,
    TOKENIZER_DIR,
    check_model_dir,
    folder_weights_sha256,
    label_names,
    load_config,
    load_tokenizer,
    logits_only,
    one_line,
    quiet_transformers,
    resolve_max_length,
    save_tokenizer,
    select_input_names,
)
from repo_builder.export.parity import DEFAULT_TOLERANCE, check_tolerance
from repo_builder.export.progress import Phases
from repo_builder.export.signature_build import LABELS_FILE, ONNX_FILE, package_versions, write_labels
from repo_builder.export.staging import staged_output
from repo_builder.export.text_graph import export_text_graph, text_graph
from repo_builder.spec import OnnxArtifact

TASK = "token-classification"
OUTPUT_NAME = "logits"


def export_token_classifier(
    model_dir: Path,
    out_dir: Path,
    *,
    opset: int = DEFAULT_OPSET,
    max_length: int | None = None,
    check_parity: bool = True,
    tolerance: float = DEFAULT_TOLERANCE,
    progress: bool = False,
    phases: Phases | None = None,
) -> OnnxArtifact:
    """Export a token classifier (logits [batch, sequence, labels]) with its fast tokenizer and labels.

    A checkpoint without a trained token-classification head (a bare encoder, or another task's head) is
    refused: entities from a random head would look like an answer.
    """
    tolerance = check_tolerance(tolerance)
    torch = require("torch", "export", "token-classifier export")
    require("transformers", "export", "token-classifier export")
    opset = check_opset(opset)
    model_dir = check_model_dir(Path(model_dir))
    phases = phases or Phases(progress)
    with phases.phase(f"loading {model_dir.name}"):
        config = load_config(model_dir)
        _require_token_architecture(model_dir, config)
        model = _load_model(model_dir)
        tokenizer = load_tokenizer(model_dir)
    input_names = select_input_names(model, tokenizer)
    length = resolve_max_length(model.config, tokenizer, max_length)
    labels = label_names(model.config)
    wrapper = logits_only(torch, model, input_names)
    graph = text_graph(model.config, tokenizer, input_names, OUTPUT_NAME, {0: "batch", 1: "sequence"}, length)

    with staged_output(out_dir) as staging:
        onnx_path = staging / ONNX_FILE
        parity = export_text_graph(
            phases, torch, wrapper, graph, onnx_path, opset=opset, check_parity=check_parity, tolerance=tolerance
        )
        tokenizer_dir = staging / TOKENIZER_DIR
        save_tokenizer(tokenizer, tokenizer_dir)
        written_labels = write_labels(labels, staging / LABELS_FILE)
        metadata = _metadata(model_dir, model, tokenizer, input_names, length, written_labels, tolerance)
        signature = write_export_signature(staging, onnx_path, graph.dynamic_axes, metadata, parity)
    return exported_artifact(out_dir, signature, written_labels, tokenizer_dir=TOKENIZER_DIR)


def _metadata(
    model_dir: Path, model: Any, tokenizer: Any, input_names: list[str], length: int, labels: tuple[str, ...], tolerance: float
) -> dict[str, Any]:
    config = model.config
    return {
        "task": TASK,
        "source": {
            "model_dir": str(model_dir.resolve()),
            "model_type": getattr(config, "model_type", None),
            "architecture": type(model).__name__,
            "weights": "local folder",
        },
        "head": "trained",
        "source_sha256": folder_weights_sha256(model_dir),
        **package_versions("transformers", "tokenizers"),
        "num_labels": len(labels),
        "input_dtype": INPUT_DTYPE,
        "parity_tolerance": tolerance,
        "preprocess": {
            "tokenizer_dir": TOKENIZER_DIR,
            "max_length": length,
            "input_names": list(input_names),
            "pad_to_multiple_of": PAD_TO_MULTIPLE_OF,
            "padding_side": getattr(tokenizer, "padding_side", "right"),
            "pad_token_id": tokenizer.pad_token_id,
            "truncation": True,
        },
        "entities": entity_metadata(tokenizer, labels),
    }


def entity_metadata(tokenizer: Any, labels: tuple[str, ...]) -> dict[str, Any]:
    """What the postprocessing step needs from the tokenizer, decided here as transformers' pipeline does."""
    backend_model = getattr(getattr(tokenizer, "_tokenizer", None), "model", None)
    return {
        "labels": list(labels),
        "unk_id": tokenizer.unk_token_id,
        # The pipeline's test: a tokenizer model with a continuing-subword prefix knows real word boundaries;
        # others fall back to "no space before the token" (gather_pre_entities).
        "word_aware": bool(getattr(backend_model, "continuing_subword_prefix", None)),
    }


def _require_token_architecture(model_dir: Path, config: Any) -> None:
    """A checkpoint saved as another task's model (a sequence classifier) would load with its head reused."""
    architectures = [str(a) for a in (getattr(config, "architectures", None) or [])]
    if architectures and not any(a.endswith("ForTokenClassification") for a in architectures):
        raise UserError(
            f"--model {model_dir}: is a {', '.join(architectures)} checkpoint, not a token classifier "
            "(its config.json architectures name no ...ForTokenClassification); pass a fine-tuned NER/token-classification folder"
        )


def _load_model(model_dir: Path) -> Any:
    """The model in eval mode with eager attention; refused when the folder lacks its classification head."""
    torch = require("torch", "export", "token-classifier export")
    from transformers import AutoModelForTokenClassification  # heavy: only when exporting

    try:
        with quiet_transformers(), torch.random.fork_rng(devices=[]):
            torch.manual_seed(HEAD_SEED)
            model, info = AutoModelForTokenClassification.from_pretrained(
                str(model_dir), local_files_only=True, attn_implementation="eager", output_loading_info=True
            )
    except ValueError as exc:
        message = one_line(exc)
        if "Unrecognized configuration class" in message or "model type" in message.lower():
            raise UserError(
                f"--model {model_dir}: this architecture has no token-classification model in transformers ({message[:200]})"
            ) from None
        raise UserError(f"--model {model_dir}: cannot load the model ({message})") from None
    except Exception as exc:  # missing/corrupt weights: OSError, SafetensorError, pickle errors ...
        raise UserError(f"--model {model_dir}: cannot load the model weights ({one_line(exc)})") from None
    missing = sorted(set(info.get("missing_keys", [])) | {str(item[0]) for item in info.get("mismatched_keys", [])})
    if missing:
        shown = ", ".join(missing[:3]) + (" ..." if len(missing) > 3 else "")
        raise UserError(
            f"--model {model_dir}: has no trained token-classification head ({shown} not in the folder); "
            "a bare encoder gives random entities: fine-tune it for token classification first"
        )
    return model.eval().float()
