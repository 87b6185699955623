"""What the classification families share: labels, the logits output, the top-k postprocessing step and
the preprocess -> model -> postprocess ensemble."""

from __future__ import annotations

import stat
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from repo_builder.errors import UserError
from repo_builder.nvcf import asset_input_name
from repo_builder.pipelines.model_step import render_model_step
from repo_builder.pipelines.nvcf_assets import nvcf_step_inputs
from repo_builder.pipelines.settings import ModelSource, PipelineSettings, step_names
from repo_builder.pipelines.steps import python_step_config, render_ensemble
from repo_builder.render import context as ctx
from repo_builder.render.render import render_source
from repo_builder.render.rendered import RenderedModel
from repo_builder.spec import Signature, TensorSpec

TOP_K_OUTPUTS = ("LABELS", "SCORES", "CLASS_IDS")


def describe_path(path: Path) -> str | None:
    """What ``path`` is when it is not a regular file ("a folder", "a FIFO" ...), None when it is one."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return "no such file"
    except OSError as exc:
        return f"cannot be read ({exc.strerror})"
    if stat.S_ISREG(mode):
        return None
    kinds = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
             (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))
    return next((f"is {name}, not a file" for test, name in kinds if test(mode)), "is not a regular file")


def check_labels_file(path: Path | None, option: str = "--labels") -> None:
    """Fail before exporting when the labels file cannot be read (the class count is checked after export)."""
    if path is None:
        return
    problem = describe_path(path)
    if problem is not None:
        raise UserError(f"{option} {path}: {problem}; pass a text file with one label per line")
    try:
        path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"{option} {path}: cannot read it as UTF-8 text ({exc})") from None


def read_labels(path: Path, num_classes: int, origin: str) -> tuple[str, ...]:
    """One label per line, as many as the model has classes."""
    problem = describe_path(path)
    if problem is not None:
        raise UserError(f"{path}: labels file {problem}; write one label per line")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"{path}: cannot read the labels file ({exc})") from None
    labels = tuple(line.rstrip("\r") for line in text.split("\n"))
    if labels and labels[-1] == "":
        labels = labels[:-1]
    if len(labels) != num_classes:
        raise UserError(f"{path}: {len(labels)} labels, but {origin} has {num_classes} classes; write one label per line")
    return labels


def class_count(signature: Signature, origin: str = "signature.json") -> int:
    return ctx.single_logits_output(signature, origin).triton_dims(signature.batch_axis)[0]


def classifier_logits(signature: Signature, labels: Sequence[str], origin: str) -> TensorSpec:
    """The logits output, with exactly one label per class."""
    logits = ctx.single_logits_output(signature, origin)
    count = logits.triton_dims(signature.batch_axis)[0]
    if len(labels) != count:
        raise UserError(f"{origin}: {len(labels)} labels for {count} classes; pass --labels FILE with one label per line")
    return logits


def render_postprocess_step(
    env: Any, logits_dtype: str, labels: Sequence[str], settings: PipelineSettings, version: int, origin: str
) -> RenderedModel:
    """Softmax and top-k in Python; the labels travel as labels.txt beside model.py (read at run time)."""
    names = step_names(settings.name)
    count = len(labels)
    if any("\n" in label or "\r" in label for label in labels):
        raise UserError(f"{origin}: a label contains a line break")
    _, outputs = ctx.classification_outputs(settings.top_k, count)
    config = python_step_config(
        env,
        names["postprocess"],
        settings,
        inputs=[ctx.tensor_context("LOGITS", logits_dtype, [count])],
        outputs=outputs,
        comment="Postprocessing: softmax over the logits, then the top-k labels, scores and class ids.",
    )
    logits = TensorSpec("LOGITS", logits_dtype, ("batch", count))
    source = render_source(
        env,
        "model/classification_postprocess.py.j2",
        ctx.postprocess_context(names["postprocess"], names["model"], logits, settings.top_k, count),
    )
    files: dict[str, Path | bytes] = {
        "model.py": source.encode(),
        "labels.txt": ("\n".join(labels) + "\n").encode("utf-8"),
    }
    return RenderedModel(names["postprocess"], "postprocess", version, config, files)


def classification_steps(
    names: Mapping[str, str], pre_input: str, model_inputs: Sequence[str], logits_name: str, extra_inputs: Sequence[str] = ()
) -> list[dict[str, Any]]:
    """preprocess -> model -> postprocess; ensemble tensors carry the member tensors' names (``extra_inputs``:
    more ensemble inputs the preprocessing step takes, e.g. NVCF asset ids)."""
    top_k_outputs = {n: n for n in TOP_K_OUTPUTS}
    pre_map = {n: n for n in (pre_input, *extra_inputs)}
    return [
        {"model_name": names["preprocess"], "input_map": pre_map, "output_map": {n: n for n in model_inputs}},
        {"model_name": names["model"], "input_map": {n: n for n in model_inputs}, "output_map": {logits_name: logits_name}},
        {"model_name": names["postprocess"], "input_map": {"LOGITS": logits_name}, "output_map": top_k_outputs},
    ]


def render_classification_pipeline(
    env: Any,
    source: ModelSource,
    settings: PipelineSettings,
    versions: Mapping[str, int],
    origin: str,
    *,
    preprocess: RenderedModel,
    pipeline_input: str,
    model_inputs: Sequence[str],
    logits: TensorSpec,
    labels: Sequence[str],
    comment: str,
) -> tuple[RenderedModel, ...]:
    """preprocess -> model -> top-k postprocess, and the ensemble clients call (``comment`` heads its config)."""
    names = step_names(settings.name)
    model = render_model_step(env, source, settings, versions[names["model"]], origin)
    post = render_postprocess_step(env, logits.dtype, labels, settings, versions[names["postprocess"]], origin)
    _, outputs = ctx.classification_outputs(settings.top_k, len(labels))
    ensemble = render_ensemble(
        env,
        settings=settings,
        version=versions[names["ensemble"]],
        inputs=nvcf_step_inputs(pipeline_input) if settings.nvcf else [ctx.tensor_context(pipeline_input, "object", [1])],
        outputs=outputs,
        members=(preprocess, model, post),
        steps=classification_steps(names, pipeline_input, model_inputs, logits.name,
                                   (asset_input_name(pipeline_input),) if settings.nvcf else ()),
        comment=comment,
    )
    return preprocess, model, post, ensemble
