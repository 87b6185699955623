"""A local Hugging Face sequence-classification folder -> model.onnx + signature.json + tokenizer/ + labels.txt."""

from __future__ import annotations

from collections.abc import Sequence
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
from repo_builder.export.hub_model import resolve_model
from repo_builder.export.parity import (
    DEFAULT_TOLERANCE,
    check_tolerance,
)
from repo_builder.export.progress import Phases
from repo_builder.export.signature_build import (
    LABELS_FILE,
    ONNX_FILE,
    package_versions,
    write_labels,
)
from repo_builder.export.staging import staged_output
from repo_builder.export.text_graph import export_text_graph, text_graph
from repo_builder.spec import OnnxArtifact

OUTPUT_NAME = "logits"


def export_text_classifier(
    model_dir: Path,
    out_dir: Path,
    *,
    opset: int = DEFAULT_OPSET,
    max_length: int | None = None,
    check_parity: bool = True,
    tolerance: float = DEFAULT_TOLERANCE,
    progress: bool = False,
    new_head: Sequence[str] | None = None,
    phases: Phases | None = None,
) -> OnnxArtifact:
    """Export a sequence classifier with dynamic batch and sequence axes, its fast tokenizer and labels.

    A checkpoint without a trained classification head (a bare encoder) is refused unless ``new_head``
    names the labels of a new, untrained head (seeded); signature.json then records ``"head": "untrained"``.
    """
    tolerance = check_tolerance(tolerance)
    torch = require("torch", "export", "text-classifier export")
    require("transformers", "export", "text-classifier export")
    opset = check_opset(opset)
    model_dir = check_model_dir(resolve_model(model_dir))  # a folder, or a Hub id (cache, then download)
    phases = phases or Phases(progress)
    with phases.phase(f"loading {model_dir.name}"):
        load_config(model_dir)  # its one-line errors first (unknown model_type ...)
        model, newly_initialized = _load_model(model_dir, new_head)
        config = model.config  # with --new-head, its id2label is the new head's
        tokenizer = load_tokenizer(model_dir)
    _require_head(model_dir, newly_initialized, new_head)
    input_names = select_input_names(model, tokenizer)
    length = resolve_max_length(config, tokenizer, max_length)
    labels = label_names(config)
    wrapper = logits_only(torch, model, input_names)
    graph = text_graph(config, tokenizer, input_names, OUTPUT_NAME, {0: "batch"}, length)

    with staged_output(out_dir) as staging:
        onnx_path = staging / ONNX_FILE
        parity = export_text_graph(
            phases, torch, wrapper, graph, onnx_path, opset=opset, check_parity=check_parity, tolerance=tolerance
        )
        tokenizer_dir = staging / TOKENIZER_DIR
        save_tokenizer(tokenizer, tokenizer_dir)
        written_labels = write_labels(labels, staging / LABELS_FILE)
        metadata: dict[str, Any] = {
            "task": "text-classification",
            "source": {
                "model_dir": str(model_dir.resolve()),
                "model_type": getattr(config, "model_type", None),
                "architecture": type(model).__name__,
                "weights": "local folder",
                # Weights the folder lacked (e.g. a classification head on a bare encoder): random, seeded.
                "newly_initialized": newly_initialized,
                "head_seed": HEAD_SEED,
            },
            # "untrained": the classification head starts from random (seeded) weights: --new-head asked for it.
            "head": "untrained" if newly_initialized else "trained",
            "source_sha256": folder_weights_sha256(model_dir),
            **package_versions("transformers", "tokenizers"),
            "num_labels": len(written_labels),
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
        }
        signature = write_export_signature(staging, onnx_path, graph.dynamic_axes, metadata, parity)
    return exported_artifact(out_dir, signature, written_labels, tokenizer_dir=TOKENIZER_DIR)


def _require_head(model_dir: Path, newly_initialized: Sequence[str], new_head: Sequence[str] | None) -> None:
    """No silent random heads: weights the folder lacks are refused unless --new-head/--num-labels asked."""
    if newly_initialized and new_head is None:
        missing = ", ".join(newly_initialized[:3]) + (" ..." if len(newly_initialized) > 3 else "")
        raise UserError(
            f"--model {model_dir}: has no trained classification head ({missing} not in the folder); "
            "pass --new-head LABELS_FILE or --num-labels N to add an untrained one on purpose"
        )


# A new head's width: 100,000 labels is already a 300 MB head on a 768-wide model; more is a typo (2**31 was fuzzed).
MAX_HEAD_LABELS = 100_000
MAX_LABELS_FILE_BYTES = 16 * 2**20


def head_labels(labels_file: Path | None, num_labels: int | None) -> list[str] | None:
    """``--new-head LABELS_FILE`` (one label per line) or ``--num-labels N`` (LABEL_0 ...): a new head's labels."""
    if labels_file is not None and num_labels is not None:
        raise UserError("pass one of --new-head LABELS_FILE or --num-labels N, not both")
    if num_labels is not None:
        if not 1 <= num_labels <= MAX_HEAD_LABELS:
            raise UserError(f"--num-labels must be between 1 and {MAX_HEAD_LABELS:,}, got {num_labels}")
        return [f"LABEL_{index}" for index in range(num_labels)]
    if labels_file is None:
        return None
    try:
        if not labels_file.is_file() or labels_file.stat().st_size > MAX_LABELS_FILE_BYTES:
            raise UserError(f"--new-head {labels_file}: not a regular file of at most {MAX_LABELS_FILE_BYTES:,} bytes; "
                            "pass a labels file, one label per line")
        text = labels_file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"--new-head {labels_file}: cannot read it as a UTF-8 labels file ({exc})") from None
    labels = [line.strip() for line in text.splitlines() if line.strip()]
    if not labels:
        raise UserError(f"--new-head {labels_file}: no labels; write one label per line")
    if len(labels) > MAX_HEAD_LABELS:
        raise UserError(f"--new-head {labels_file}: {len(labels):,} labels, more than {MAX_HEAD_LABELS:,}; a new head that wide "
                        "is not a text classifier")
    return labels


def _load_model(model_dir: Path, new_head: Sequence[str] | None = None) -> tuple[Any, list[str]]:
    """The model in eval mode with eager attention, and the weights it had to initialise itself."""
    torch = require("torch", "export", "text-classifier export")
    from transformers import AutoModelForSequenceClassification

    # Eager attention traces to plain MatMul/Softmax that ONNX Runtime and TensorRT both fuse; SDPA traces
    # too but adds NaN guards. Parity below compares against this same module.
    try:
        with quiet_transformers(), torch.random.fork_rng(devices=[]):
            torch.manual_seed(HEAD_SEED)
            model, info = AutoModelForSequenceClassification.from_pretrained(
                str(model_dir), local_files_only=True, attn_implementation="eager", output_loading_info=True,
                **_head_kwargs(new_head),
            )
    except ValueError as exc:
        message = one_line(exc)
        if "Unrecognized configuration class" in message or "model type" in message.lower():
            raise UserError(
                f"--model {model_dir}: this architecture has no sequence-classification model in transformers "
                f"({message[:200]})"
            ) from None
        raise UserError(f"--model {model_dir}: cannot load the model ({message})") from None
    except Exception as exc:  # missing/corrupt weights: OSError, SafetensorError, pickle errors ...
        raise UserError(f"--model {model_dir}: cannot load the model weights ({one_line(exc)})") from None
    replaced = [str(item[0]) for item in info.get("mismatched_keys", [])]
    return model.eval().float(), sorted(set(info.get("missing_keys", [])) | set(replaced))


def _head_kwargs(new_head: Sequence[str] | None) -> dict[str, Any]:
    """A new head of ``len(new_head)`` classes, replacing a head of another size (ignore_mismatched_sizes)."""
    if new_head is None:
        return {}
    id2label = dict(enumerate(new_head))
    return {"num_labels": len(new_head), "id2label": id2label, "label2id": {v: k for k, v in id2label.items()},
            "ignore_mismatched_sizes": True}


