"""Text embeddings: text (TYPE_STRING [1]) -> tokenizer (Python) -> encoder with pooling and normalization
fused in its graph -> EMBEDDING [dim] per text. Two steps: the model's output is the answer, so no Python
step runs after it (one round trip less per request).

The reference is ``SentenceTransformer.encode`` on the same checkpoint (sentence-transformers imported
inside the functions that need it: the test and export extras).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from repo_builder.errors import UserError, require
from repo_builder.export.embedder_checkpoint import OUTPUT_DTYPES, POOLINGS, read_embedder_checkpoint
from repo_builder.export.text_embedder import TASK, export_text_embedder
from repo_builder.pipelines.chain import pre_model_steps, render_chain
from repo_builder.pipelines.family import (
    ExportSettings,
    Family,
    FamilyExport,
    FamilyJob,
    FamilyOption,
    FamilyReference,
    InProcess,
    ReferenceReport,
    ReferenceRun,
    RenderInputs,
)
from repo_builder.pipelines.settings import budget_context, step_names
from repo_builder.pipelines.steps import preprocess_metadata, render_preprocess_step
from repo_builder.pipelines.text_classification import export_tokenizer_dir, tokenizer_files
from repo_builder.pipelines.text_tokenizer_onnx import OPTIONS as PREPROCESS_OPTIONS
from repo_builder.pipelines.text_tokenizer_onnx import (
    check_checkpoint_tokenizer,
    render_tokenizer_step,
    wants_onnx,
)
from repo_builder.precision import metrics
from repo_builder.render import context as ctx
from repo_builder.render.render import render_source, render_text
from repo_builder.render.rendered import RenderedModel
from repo_builder.spec import OnnxArtifact

if TYPE_CHECKING:
    from repo_builder.export.progress import Phases
    from repo_builder.pipelines.assemble import BuildOptions

TEXT_INPUT = "TEXT"
EMBEDDING_OUTPUT = "EMBEDDING"
TEMPLATES = ("model/text_preprocess.py.j2", "model/_text_bounds.py.j2", "model/_request_budget.py.j2", "model/_failure.py.j2", "model/preprocess_README.md.j2")
# Served vs SentenceTransformer.encode, per vector (issue 19); fp16 output rounds each value to ~1e-3.
MIN_COSINE = 0.9999
MAX_ABS_DIFF = {"fp32": 1e-4, "fp16": 2e-3}

_MODEL_HELP = ("A sentence-transformers folder (modules.json, 1_Pooling/, Normalize; its own pooling is used) "
               "or a Hugging Face encoder folder with --pooling.")
_COMMON = (
    FamilyOption(("--pooling",), "pooling", "Pooling of a plain Hugging Face encoder (a sentence-transformers folder states its own).",
                 kind="choice", choices=POOLINGS),
    FamilyOption(("--normalize",), "normalize", "L2-normalize each vector (a sentence-transformers folder: its Normalize module).", kind="flag"),
    FamilyOption(("--max-length",), "max_length", "Truncate texts to this many tokens (default: sentence_bert_config.json "
                 "max_seq_length, else the model's maximum).", kind="int"),
    FamilyOption(("--output-dtype",), "output_dtype", "EMBEDDING's type: fp32, or fp16 (half the bytes, ~1e-3 rounding).",
                 default="fp32", kind="choice", choices=OUTPUT_DTYPES),
)
OPTIONS = (FamilyOption(("--model",), "model", _MODEL_HELP, kind="path"), *_COMMON, *PREPROCESS_OPTIONS)
EXPORT_OPTIONS = (FamilyOption(("--model",), "model", _MODEL_HELP, kind="path", required=True), *_COMMON)


def _max_length(params: Mapping[str, Any]) -> int | None:
    value = params.get("max_length")
    if value is not None and value < 1:
        raise UserError(f"--max-length must be >= 1, got {value}")
    return value


def prepare(params: Mapping[str, Any], options: BuildOptions, phases: Phases) -> FamilyJob:
    """--model FOLDER: its pooling read now (a bad folder fails before anything is staged)."""
    model = params.get("model")
    if model is None:
        raise UserError("build text-embedder needs --model PATH (a sentence-transformers or Hugging Face folder) or --from-export DIR")
    checkpoint = read_embedder_checkpoint(Path(model), pooling=params.get("pooling"), normalize=bool(params.get("normalize")))
    max_length, output_dtype = _max_length(params), str(params.get("output_dtype") or "fp32")
    check_checkpoint_tokenizer(params, Path(model))

    def export(folder: Path) -> OnnxArtifact:
        return export_text_embedder(checkpoint, folder, max_length=max_length, output_dtype=output_dtype,
                                    check_parity=options.check_parity, phases=phases)

    record = {"model": str(Path(model).resolve()), "pooling": checkpoint.pooling, "normalize": checkpoint.normalize,
              "max_length": max_length, "output_dtype": output_dtype, "pooling_from": checkpoint.origin,
              "preprocess": "onnx" if wants_onnx(params) else "python"}
    return FamilyJob(export=export, record=record, describe=f"exporting {Path(model).name} to ONNX (pooling fused)")


def run_export(params: Mapping[str, Any], settings: ExportSettings) -> OnnxArtifact:
    """A text embedder: dynamic batch and sequence axes, pooling and normalization fused, tokenizer beside it."""
    checkpoint = read_embedder_checkpoint(Path(params["model"]), pooling=params.get("pooling"), normalize=bool(params.get("normalize")))
    return export_text_embedder(checkpoint, settings.out, max_length=_max_length(params),
                                output_dtype=str(params.get("output_dtype") or "fp32"), **settings.kwargs())


def _embedding(inputs: RenderInputs) -> Mapping[str, Any]:
    block = inputs.artifact.signature.metadata.get("embedding")
    if not isinstance(block, dict) or not isinstance(block.get("output"), str):
        raise UserError(f"{inputs.origin}: metadata.embedding is missing; re-run 'repo-builder export text-embedder'")
    return block


def readme(embedding: Mapping[str, Any], max_length: int, name: str) -> str:
    """The ensemble's README.md: what clients get and where pooling runs."""
    norm = "L2-normalized (unit length)" if embedding.get("normalize") else "not normalized"
    return (
        f"# {name}: text embeddings\n\n"
        f"Input `{TEXT_INPUT}`: one UTF-8 text per row (TYPE_STRING [1]); truncated to {max_length} tokens.\n"
        f"Output `{EMBEDDING_OUTPUT}`: {embedding.get('output_dtype', 'fp32')} [{embedding.get('dimension')}] per text, "
        f"{embedding.get('pooling')} pooling, {norm}.\n\n"
        f"Pooling and normalization are fused into the model's ONNX graph ({embedding.get('fused')}), as read from "
        f"{'the checkpoint' + chr(39) + 's sentence-transformers modules' if embedding.get('from') == 'sentence-transformers' else 'the build options'}; "
        "signature.json beside this file records the same (metadata.embedding, metadata.preprocess).\n\n"
        f"Limits on what a request may send, their errors and how to raise them: {name}_preprocess's README.md.\n"
    )


def render(inputs: RenderInputs) -> tuple[RenderedModel, ...]:
    env, settings, versions, origin = inputs.env, inputs.settings, inputs.versions, inputs.origin
    names = step_names(settings.name)
    sig = inputs.source.signature
    ctx.require_batch_axis(sig, origin)
    embedding = _embedding(inputs)
    preprocess = preprocess_metadata(inputs.artifact.signature, origin, "tokenizer settings")
    pre_context = ctx.text_preprocess_context(names["preprocess"], names["model"], sig.inputs, preprocess, origin)
    output = next((t for t in sig.outputs if t.name == embedding["output"]), None)
    if output is None or len(sig.outputs) != 1 or len(output.triton_dims(sig.batch_axis)) != 1:
        raise UserError(f"{origin}: the model must have one output '{embedding['output']}' of shape (batch, dim)")
    if wants_onnx(inputs.params):  # --preprocess onnx: the tokenizer as an ONNX Runtime step
        pre = render_tokenizer_step(inputs, sig.inputs, int(pre_context["max_length"]), export_tokenizer_dir(inputs.artifact), TEXT_INPUT)
    else:
        budget = budget_context(settings)
        files: dict[str, Path | bytes] = {"model.py": render_source(env, "model/text_preprocess.py.j2", {**pre_context, **budget}).encode()}
        limits = ctx.limits_readme_context(names["preprocess"], max_length=int(pre_context["max_length"]), budget=budget)
        files["README.md"] = render_text(env, "model/preprocess_README.md.j2", limits).encode()
        files.update(tokenizer_files(export_tokenizer_dir(inputs.artifact)))
        pre = render_preprocess_step(
            env, settings, versions[names["preprocess"]], pipeline_input=TEXT_INPUT,
            outputs=[ctx.tensor_context(t.name, t.dtype, [-1]) for t in sig.inputs],
            comment="Preprocessing: one UTF-8 text per row -> token ids padded to the batch's longest (multiple of 8).",
            files=files,
        )
    dims = list(output.triton_dims(sig.batch_axis))
    steps = pre_model_steps(names, pipeline_inputs=[TEXT_INPUT], model_inputs=[t.name for t in sig.inputs],
                            model_outputs={output.name: EMBEDDING_OUTPUT})
    text = readme(embedding, int(pre_context["max_length"]), settings.name)
    return render_chain(
        env, inputs.source, settings, versions, origin, pre=pre, post=None,
        ensemble_inputs=[ctx.tensor_context(TEXT_INPUT, "object", [1])],
        ensemble_outputs=[ctx.tensor_context(EMBEDDING_OUTPUT, output.dtype, dims)],
        steps=steps,
        comment=f"Clients call this: TEXT (UTF-8, TYPE_STRING [1]) -> EMBEDDING [{dims[0]}] ({embedding.get('pooling')} pooling"
                f"{', normalized' if embedding.get('normalize') else ''}, fused in the model).",
        # The export's signature.json beside it: pooling, normalization and truncation as recorded (metadata.embedding).
        ensemble_files={"README.md": text.encode(), "signature.json": inputs.artifact.signature_path},
    )


# --- the reference: SentenceTransformer.encode on the same checkpoint and texts ------------------------------

_SCRIPTS = ("日本語の文章です。", "这是一个中文句子。", "Это предложение на русском языке.", "هذه جملة باللغة العربية.",
            "यह हिंदी में एक वाक्य है।", "한국어 문장입니다.", "Ελληνικά γράμματα εδώ.", "עברית גם כן.", "ภาษาไทยก็มี")
_EMOJI = ("🙂", "🚀🔥 launch day!", "I ❤️ Triton 🤖", "👩‍👩‍👧‍👦 family", "🇫🇷🇯🇵 flags")
_WORDS = ("the", "quick", "brown", "fox", "ensemble", "triton", "serves", "vectors", "of", "text", "tokenizer", "pooling")


def reference_texts(count: int) -> list[str]:
    """``count`` texts (>= 30) covering the hard cases: empty, one character, over the maximum length,
    non-Latin scripts, emoji, whitespace, and lengths mixed so every batch holds short and long ones."""
    fixed = ["", " ", "a", "Z", "?", "é", "字", "\t tabs and  spaces \n", *_SCRIPTS, *_EMOJI,
             " ".join(_WORDS * 60), "supercalifragilistic" * 100, ("混合 mixed 🙂 text " * 80).strip()]
    texts = list(fixed)
    index = 0
    while len(texts) < count:
        length = (index * 7) % 97 + 1  # 1 .. 97 words, mixed
        words = [_WORDS[(index + k) % len(_WORDS)] for k in range(length)]
        extra = _SCRIPTS[index % len(_SCRIPTS)] if index % 3 == 0 else _EMOJI[index % len(_EMOJI)] if index % 5 == 0 else ""
        texts.append(" ".join(words) + (" " + extra if extra else ""))
        index += 1
    return texts[:max(count, len(fixed))]


def text_request(texts: Sequence[str]) -> Mapping[str, Any]:
    import numpy as np  # with the serve extra, as everywhere under the Triton client

    return {TEXT_INPUT: np.array([[t.encode("utf-8")] for t in texts], dtype=object)}


def sentence_transformer(model: Path, record: Mapping[str, Any] | None = None, threads: int | None = None) -> Any:
    """The reference model: the folder itself when it is a sentence-transformers folder, else Transformer +
    Pooling (+ Normalize) from the recorded build options; on the CPU."""
    import warnings

    torch = require("torch", "test", "the text-embedder reference")
    st = require("sentence_transformers", "test", "the text-embedder reference")
    if threads:
        torch.set_num_threads(threads)
    record = record or {}
    if (model / "modules.json").is_file():
        return st.SentenceTransformer(str(model), device="cpu")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        # sentence-transformers 6 provides `models` lazily (the deprecation silenced above); its stubs do not list it.
        from sentence_transformers import models  # type: ignore[attr-defined]
    encoder = models.Transformer(str(model), max_seq_length=record.get("max_length") or None)
    modules = [encoder, models.Pooling(_dimension(encoder), pooling_mode=str(record.get("pooling") or "mean"))]
    if record.get("normalize"):
        modules.append(models.Normalize())
    return st.SentenceTransformer(modules=modules, device="cpu")


def _dimension(encoder: Any) -> int:
    """The encoder's output size (sentence-transformers renamed the getter in 6.x)."""
    getter = getattr(encoder, "get_embedding_dimension", None) or encoder.get_word_embedding_dimension
    return int(getter())


def _batches(count: int, max_batch: int) -> list[slice]:
    """Batch sizes cycling 1, max, 3, max-1 ...: single texts and mixed-length batches of every size."""
    sizes = [1, max_batch, 3, max(1, max_batch - 1), 2]
    out, start, index = [], 0, 0
    while start < count:
        size = min(sizes[index % len(sizes)], max_batch, count - start)
        out.append(slice(start, start + size))
        start, index = start + size, index + 1
    return out


def check(run: ReferenceRun) -> ReferenceReport:
    """Served EMBEDDING vs ``SentenceTransformer.encode`` per text: cosine and max abs difference."""
    import numpy as np  # with the serve extra

    texts = reference_texts(run.minimum_cases)
    model = sentence_transformer(run.model, run.settings)
    if run.settings.get("max_length"):
        model.max_seq_length = int(run.settings["max_length"])
    expected = np.asarray(model.encode(texts, batch_size=32, convert_to_numpy=True), dtype=np.float32)
    served = np.concatenate([np.asarray(run.infer(text_request(texts[s]))[EMBEDDING_OUTPUT], dtype=np.float32)
                             for s in _batches(len(texts), run.max_batch_size)])
    if served.shape != expected.shape:
        return ReferenceReport("text-embedder", len(texts), False, {}, {}, (f"served shape {served.shape}, expected {expected.shape}",))
    cosine = (served * expected).sum(1) / np.maximum(np.linalg.norm(served, axis=1) * np.linalg.norm(expected, axis=1), 1e-12)
    diff = np.abs(served - expected).max(axis=1)
    limit = MAX_ABS_DIFF.get(str(run.settings.get("output_dtype") or "fp32"), MAX_ABS_DIFF["fp32"])
    bad = [i for i in range(len(texts)) if not (cosine[i] >= MIN_COSINE and diff[i] <= limit)]
    failures = tuple(f"text {i} ({json.dumps(texts[i][:40], ensure_ascii=False)}): cosine {cosine[i]:.6f}, max abs {diff[i]:.2e}"
                     for i in bad[:5])
    return ReferenceReport("text-embedder", len(texts), not bad, {"min_cosine": float(cosine.min()), "max_abs_diff": float(diff.max())},
                           {"min_cosine": f">= {MIN_COSINE}", "max_abs_diff": f"<= {limit:g}"}, failures)


def load_in_process(model: Path, threads: int) -> InProcess:
    reference = sentence_transformer(model, threads=threads)
    return InProcess(run=lambda items: reference.encode(list(items), batch_size=max(1, len(items)), convert_to_numpy=True), threads=threads)


EXPORT = FamilyExport(run_export.__doc__ or "", EXPORT_OPTIONS, run_export)
REFERENCE = FamilyReference(check=check, items=reference_texts, request=text_request, load=load_in_process, unit="texts")
FAMILY = Family(
    command="text-embedder",
    task=TASK,
    summary="Sentence embeddings: a sentence-transformers folder (or a Hugging Face encoder with --pooling): "
    "text in, one vector per text out (pooling/normalization fused into the model).",
    default_name="text_embedder",
    prepare=prepare,
    render=render,
    options=OPTIONS,
    templates=TEMPLATES,
    export=EXPORT,
    signature_keys=("preprocess", "embedding"),
    reference=REFERENCE,
    accuracy=metrics.text_embedding(),
)
