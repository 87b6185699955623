"""Token classification (NER): text (TYPE_STRING [1]) -> tokenizer (Python) -> model -> entities (Python) -> JSON.

The ensemble returns one JSON string per text (``entities``, TYPE_STRING [1]): the list transformers'
``pipeline("token-classification", aggregation_strategy=A, ignore_labels=I)`` returns for it, with the same
keys. The preprocessing step emits the model's inputs plus what the entity step needs (character offsets,
the special-tokens mask, the texts); the model step gets only its inputs; the entity step also reads the
token ids (for each token's string), and is plain numpy (templates/model/token_entities.py.j2).

Texts longer than the export's maximum length are refused per request by default (``--long-texts refuse``);
``--long-texts truncate`` cuts them as the pipeline does without ``stride``. The pipeline's ``stride``
(overlapping windows) is not offered.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from repo_builder.errors import UserError
from repo_builder.export.token_classifier import TASK, export_token_classifier
from repo_builder.pipelines.chain import render_chain
from repo_builder.pipelines.family import (
    ExportSettings,
    FamilyExport,
    FamilyJob,
    FamilyOption,
    FamilyReference,
    InProcess,
    ReferenceReport,
    ReferenceRun,
    RenderInputs,
)
from repo_builder.pipelines.settings import PipelineSettings, budget_context, step_names
from repo_builder.pipelines.steps import preprocess_metadata, python_step_config, render_preprocess_step
from repo_builder.pipelines.token_reference import (
    check_entities,
    entities_request,
    in_process_pipeline,
    reference_texts,
)
from repo_builder.render import context as ctx
from repo_builder.render.render import render_source, render_text
from repo_builder.render.rendered import RenderedModel
from repo_builder.spec import OnnxArtifact, Signature, TensorSpec

if TYPE_CHECKING:
    from repo_builder.export.progress import Phases
    from repo_builder.pipelines.assemble import BuildOptions

TEXT_INPUT = "TEXT"
OUTPUT = "entities"
# Ensemble tensors from the preprocessing step to the entity step (the model never sees them).
OFFSETS = "OFFSETS"
SPECIAL_TOKENS_MASK = "SPECIAL_TOKENS_MASK"
TEXTS = "TEXTS"
POST_LOGITS = "LOGITS"
POST_INPUT_IDS = "INPUT_IDS"
SETTINGS_FILE = "entities.json"
AGGREGATIONS = ("none", "simple", "first", "average", "max")
LONG_TEXTS = ("refuse", "truncate")
TEMPLATES = ("model/token_preprocess.py.j2", "model/_text_bounds.py.j2", "model/_request_budget.py.j2", "model/_failure.py.j2", "model/token_postprocess.py.j2", "model/token_entities.py.j2",
             "model/preprocess_README.md.j2")


@dataclass(frozen=True)
class EntityChoices:
    """How tokens become entities: the pipeline's aggregation_strategy and ignore_labels, and long texts."""

    aggregation: str = "simple"
    ignore_labels: tuple[str, ...] = ("O",)
    long_texts: str = "refuse"

    def __post_init__(self) -> None:
        if self.aggregation not in AGGREGATIONS:
            raise UserError(f"--aggregation {self.aggregation!r}: expected one of {', '.join(AGGREGATIONS)}")
        if self.long_texts not in LONG_TEXTS:
            raise UserError(f"--long-texts {self.long_texts!r}: expected one of {', '.join(LONG_TEXTS)}")


def parse_ignore_labels(text: str | None) -> tuple[str, ...]:
    """``--ignore-labels O,MISC`` (comma-separated; an empty string ignores nothing); default: O, as the pipeline."""
    if text is None:
        return ("O",)
    return tuple(label.strip() for label in text.split(",") if label.strip())


def entity_choices(params: Mapping[str, Any]) -> EntityChoices:
    """From the build's options (or the manifest's record of them: ignore_labels then is a list)."""
    ignore = params.get("ignore_labels")
    return EntityChoices(
        aggregation=str(params.get("aggregation") or "simple"),
        ignore_labels=tuple(str(i) for i in ignore) if isinstance(ignore, list | tuple) else parse_ignore_labels(ignore),
        long_texts=str(params.get("long_texts") or "refuse"),
    )


def entity_settings(signature: Signature, choices: EntityChoices, origin: str) -> dict[str, Any]:
    """The entity step's settings file: labels, unknown token, word awareness (from export) and the choices."""
    recorded = signature.metadata.get("entities")
    if not isinstance(recorded, dict) or not isinstance(recorded.get("labels"), list):
        raise UserError(f"{origin}: metadata.entities is missing; re-run 'repo-builder export token-classifier'")
    labels = [str(label) for label in recorded["labels"]]
    return {
        "labels": labels,
        "ignore_labels": list(choices.ignore_labels),
        "aggregation": choices.aggregation,
        "unk_id": recorded.get("unk_id"),
        "word_aware": bool(recorded.get("word_aware", True)),
    }


def token_logits(signature: Signature, num_labels: int, origin: str) -> TensorSpec:
    """The model's one output, (batch, sequence, labels)."""
    if len(signature.outputs) != 1:
        raise UserError(f"{origin}: a token classifier has one output (logits), found {', '.join(t.name for t in signature.outputs)}")
    logits = signature.outputs[0]
    dims = logits.triton_dims(signature.batch_axis)
    if len(dims) != 2 or dims[1] != num_labels:
        raise UserError(f"{origin}: output '{logits.name}' must be (batch, sequence, {num_labels} labels), got {list(logits.shape)}")
    if logits.dtype not in ("float16", "float32"):
        raise UserError(f"{origin}: output '{logits.name}' must be float16 or float32, got {logits.dtype}")
    return logits


def _preprocess_step(
    env: Any, sig: Signature, preprocess: Mapping[str, Any], settings: PipelineSettings, version: int,
    tokenizer_files: Mapping[str, Path], choices: EntityChoices, origin: str,
) -> RenderedModel:
    names = step_names(settings.name)
    base = ctx.text_preprocess_context(names["preprocess"], names["model"], sig.inputs, preprocess, origin)
    context = {**base, "long_texts": choices.long_texts, "offsets_name": OFFSETS, "special_name": SPECIAL_TOKENS_MASK, "texts_name": TEXTS}
    budget = budget_context(settings)
    files: dict[str, Path | bytes] = {"model.py": render_source(env, "model/token_preprocess.py.j2", {**context, **budget}).encode()}
    limits = ctx.limits_readme_context(names["preprocess"], max_length=int(base["max_length"]), long_texts=choices.long_texts,
                                       budget=budget, byte_copies=6)
    files["README.md"] = render_text(env, "model/preprocess_README.md.j2", limits).encode()
    files.update(tokenizer_files)
    return render_preprocess_step(
        env, settings, version, pipeline_input=TEXT_INPUT,
        outputs=[
            *(ctx.tensor_context(t.name, t.dtype, [-1]) for t in sig.inputs),
            ctx.tensor_context(OFFSETS, "int32", [-1, 2]),
            ctx.tensor_context(SPECIAL_TOKENS_MASK, "int8", [-1]),
            ctx.tensor_context(TEXTS, "object", [1]),
        ],
        comment="Preprocessing: UTF-8 texts -> token ids (padded to the batch's longest), offsets, special-tokens mask.",
        files=files,
    )


def _entity_step(
    env: Any, logits: TensorSpec, ids_dtype: str, entity_config: Mapping[str, Any], settings: PipelineSettings,
    version: int, tokenizer_json: Path,
) -> RenderedModel:
    names = step_names(settings.name)
    num_labels = len(entity_config["labels"])
    config = python_step_config(
        env, names["postprocess"], settings,
        inputs=[
            ctx.tensor_context(POST_LOGITS, logits.dtype, [-1, num_labels]),
            ctx.tensor_context(POST_INPUT_IDS, ids_dtype, [-1]),
            ctx.tensor_context(OFFSETS, "int32", [-1, 2]),
            ctx.tensor_context(SPECIAL_TOKENS_MASK, "int8", [-1]),
            ctx.tensor_context(TEXTS, "object", [1]),
        ],
        outputs=[ctx.tensor_context(OUTPUT, "object", [1])],
        comment=f"Postprocessing: logits per token -> entities (aggregation {entity_config['aggregation']}) as one JSON list per text.",
    )
    context = {
        "aggregation": entity_config["aggregation"], "settings_file": SETTINGS_FILE, "tokenizer_file": "tokenizer/tokenizer.json",
        "logits_name": POST_LOGITS, "input_ids_name": POST_INPUT_IDS, "offsets_name": OFFSETS,
        "special_name": SPECIAL_TOKENS_MASK, "texts_name": TEXTS, "output_name": OUTPUT,
    }
    files: dict[str, Path | bytes] = {
        "model.py": render_source(env, "model/token_postprocess.py.j2", context).encode(),
        "entities.py": render_source(env, "model/token_entities.py.j2", {}).encode(),
        SETTINGS_FILE: (json.dumps(entity_config, ensure_ascii=False, indent=1) + "\n").encode("utf-8"),
        # Bytes, not the path: the writer moves files into the first step that lists them (the preprocessing step).
        "tokenizer/tokenizer.json": tokenizer_json.read_bytes(),
    }
    return RenderedModel(names["postprocess"], "postprocess", version, config, files)


def token_steps(names: Mapping[str, str], model_inputs: list[str], logits_name: str) -> list[dict[str, Any]]:
    """TEXT -> preprocess -> model -> entities; the token ids feed the model and the entity step alike."""
    carried = (OFFSETS, SPECIAL_TOKENS_MASK, TEXTS)
    return [
        {"model_name": names["preprocess"], "input_map": {TEXT_INPUT: TEXT_INPUT}, "output_map": {n: n for n in (*model_inputs, *carried)}},
        {"model_name": names["model"], "input_map": {n: n for n in model_inputs}, "output_map": {logits_name: logits_name}},
        {"model_name": names["postprocess"],
         "input_map": {POST_LOGITS: logits_name, POST_INPUT_IDS: "input_ids", **{n: n for n in carried}},
         "output_map": {OUTPUT: OUTPUT}},
    ]


def render_token_pipeline(inputs: RenderInputs, choices: EntityChoices) -> tuple[RenderedModel, ...]:
    origin, settings, versions, env = inputs.origin, inputs.settings, inputs.versions, inputs.env
    names = step_names(settings.name)
    sig = inputs.source.signature
    ctx.require_batch_axis(sig, origin)
    entity_config = entity_settings(inputs.artifact.signature, choices, origin)
    logits = token_logits(sig, len(entity_config["labels"]), origin)
    model_inputs = {t.name: t for t in sig.inputs}
    if "input_ids" not in model_inputs:
        raise UserError(f"{origin}: the model takes no input_ids; the entity step reads each token's id")
    for spec in sig.inputs:
        if len(spec.triton_dims(sig.batch_axis)) != 1:
            raise UserError(f"{origin}: input '{spec.name}' must be (batch, sequence), got {list(spec.shape)}")
    tokenizer_dir = export_tokenizer_dir(inputs.artifact)
    tokenizer_json = tokenizer_dir / "tokenizer.json"
    if not tokenizer_json.is_file():
        raise UserError(f"{tokenizer_dir}: no tokenizer.json; the pre and post steps need the saved fast tokenizer")
    tokenizer_files = {f"tokenizer/{p.name}": p for p in sorted(tokenizer_dir.iterdir()) if p.is_file()}
    preprocess = preprocess_metadata(inputs.artifact.signature, origin, "tokenizer settings")
    pre = _preprocess_step(env, sig, preprocess, settings, versions[names["preprocess"]], tokenizer_files, choices, origin)
    post = _entity_step(env, logits, model_inputs["input_ids"].dtype, entity_config, settings, versions[names["postprocess"]], tokenizer_json)
    described = (f"as transformers' pipeline(\"token-classification\", aggregation_strategy={choices.aggregation!r}, "
                 f"ignore_labels={list(choices.ignore_labels)!r})")
    readme = (f"# {settings.name}\n\nTEXT (UTF-8, TYPE_STRING [1]) -> entities: one JSON list per text, {described}.\n"
              f"Texts over {preprocess.get('max_length')} tokens: {choices.long_texts}.\n\n"
              f"Limits on what a request may send, their errors and how to raise them: {names['preprocess']}'s README.md.\n")
    return render_chain(
        env, inputs.source, settings, versions, origin, pre=pre, post=post,
        ensemble_inputs=[ctx.tensor_context(TEXT_INPUT, "object", [1])],
        ensemble_outputs=[ctx.tensor_context(OUTPUT, "object", [1])],
        steps=token_steps(names, [t.name for t in sig.inputs], logits.name),
        comment=f"Clients call this: TEXT (UTF-8, TYPE_STRING [1]) -> entities (one JSON list per text, {described}).",
        ensemble_files={"README.md": readme.encode("utf-8")},
    )


def export_tokenizer_dir(artifact: OnnxArtifact) -> Path:
    """The export's saved tokenizer folder (metadata.preprocess.tokenizer_dir beside model.onnx)."""
    if artifact.tokenizer_dir is not None:
        return artifact.tokenizer_dir
    preprocess = artifact.signature.metadata.get("preprocess")
    name = preprocess.get("tokenizer_dir", "tokenizer") if isinstance(preprocess, dict) else "tokenizer"
    return artifact.onnx_path.parent / str(name)


def render_family(inputs: RenderInputs) -> tuple[RenderedModel, ...]:
    return render_token_pipeline(inputs, entity_choices(inputs.params))


# --- the family record's parts ---------------------------------------------------------------------------

TOKEN_CLASSIFIER_OPTIONS = (
    FamilyOption(("--model",), "model", "Hugging Face token-classification (NER) model folder (config, weights, fast tokenizer).", kind="path"),
    FamilyOption(("--max-length",), "max_length", "Longest text in tokens (default: the model's maximum).", kind="int"),
    FamilyOption(("--aggregation",), "aggregation", "How tokens become entities, as transformers' aggregation_strategy: "
                 "none|simple|first|average|max (default simple).", default="simple", kind="choice", choices=AGGREGATIONS,
                 conflicts_with_export=False),
    FamilyOption(("--ignore-labels",), "ignore_labels", "Labels never returned, comma-separated, as the pipeline's ignore_labels "
                 "(default O; '' returns every label).", metavar="LABELS", conflicts_with_export=False),
    FamilyOption(("--long-texts",), "long_texts", "Texts over the maximum length: refuse (an error for that request, default) "
                 "or truncate (as the pipeline without stride).", default="refuse", kind="choice", choices=LONG_TEXTS,
                 conflicts_with_export=False),
)


def prepare_token_classifier(params: Mapping[str, Any], options: BuildOptions, phases: Phases) -> FamilyJob:
    """--model FOLDER (checked now), --max-length; the entity choices are checked here too (before staging)."""
    choices = entity_choices(params)
    model_dir = params.get("model")
    if model_dir is None:
        raise UserError("build token-classifier needs exactly one of --model PATH or --from-export DIR")
    model_dir = Path(model_dir)
    if not model_dir.is_dir():
        raise UserError(f"--model {model_dir}: no such folder; pass a Hugging Face token-classification folder")
    max_length = params.get("max_length")
    if max_length is not None and max_length < 1:
        raise UserError(f"--max-length must be >= 1, got {max_length}")

    def export(folder: Path) -> OnnxArtifact:
        return export_token_classifier(model_dir, folder, max_length=max_length, check_parity=options.check_parity, phases=phases)

    record = {"model": str(model_dir.resolve()), "max_length": max_length, "task": TASK,
              "aggregation": choices.aggregation, "ignore_labels": list(choices.ignore_labels), "long_texts": choices.long_texts}
    return FamilyJob(export=export, record=record, describe=f"exporting {model_dir.name} to ONNX")


# --- its ``repo-builder export token-classifier`` and its reference -------------------------------------------

EXPORT_OPTIONS = (
    FamilyOption(("--model",), "model", "Local Hugging Face token-classification folder (config, weights, fast tokenizer).",
                 kind="path", required=True),
    FamilyOption(("--max-length",), "max_length", "Longest token sequence to serve (default: the model's maximum positions).", kind="int"),
)


def run_export(params: Mapping[str, Any], settings: ExportSettings) -> OnnxArtifact:
    """Hugging Face token classifier: logits per token, dynamic batch and sequence axes, tokenizer and labels beside it."""
    return export_token_classifier(Path(params["model"]), settings.out, max_length=params.get("max_length"), **settings.kwargs())


EXPORT = FamilyExport(run_export.__doc__ or "", EXPORT_OPTIONS, run_export)


def _check(run: ReferenceRun) -> ReferenceReport:
    choices = entity_choices(run.settings)
    return check_entities(run, choices.aggregation, choices.ignore_labels, choices.long_texts, run.settings.get("max_length"))


def _load(model: Path, threads: int) -> InProcess:
    return in_process_pipeline(model, threads)


REFERENCE = FamilyReference(check=_check, items=reference_texts, request=entities_request, load=_load, unit="texts")
