"""A toy family written the way docs/new-family.md says, outside the package: the guard test registers it
with one line and builds, exports, serves and reference-checks it without any other edit.

Text in -> the preprocess step emits its UTF-8 length as the model input X and, carried past the model,
as TEXT_LEN -> the model multiplies X by --factor (an ONNX Mul) -> the postprocess step returns both.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from repo_builder.errors import UserError
from repo_builder.pipelines.chain import chain_steps, render_chain
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
from repo_builder.pipelines.settings import step_names
from repo_builder.pipelines.steps import python_step_config, render_preprocess_step
from repo_builder.render import context as ctx
from repo_builder.render.render import render_source
from repo_builder.render.rendered import RenderedModel
from repo_builder.spec import OnnxArtifact, Signature, TensorSpec, write_signature

TASK = "toy-length"
OPTIONS = (FamilyOption(("--factor",), "factor", "What the model multiplies each length by.", default=2.0, kind="float"),)


def export_toy(out: Path, factor: float) -> OnnxArtifact:
    import onnx  # heavy-ish, and only the export needs it
    from onnx import TensorProto, helper

    out.mkdir(parents=True, exist_ok=True)
    graph = helper.make_graph(
        [helper.make_node("Mul", ["X", "K"], ["Y"])],
        "toy",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["batch", 1])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["batch", 1])],
        [helper.make_tensor("K", TensorProto.FLOAT, [1], [factor])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, str(out / "model.onnx"))
    signature = Signature(
        (TensorSpec("X", "float32", ("batch", 1)),), (TensorSpec("Y", "float32", ("batch", 1)),),
        metadata={"task": TASK, "toy": {"factor": factor}},
    )
    return OnnxArtifact(out / "model.onnx", write_signature(signature, out), signature)


def prepare(params: Mapping[str, Any], options: Any, phases: Any) -> FamilyJob:
    factor = float(params.get("factor") or 2.0)
    if factor <= 0:
        raise UserError(f"--factor must be > 0, got {factor}")
    return FamilyJob(export=lambda folder: export_toy(folder, factor), record={"model": "toy", "factor": factor})


def render(inputs: RenderInputs) -> tuple[RenderedModel, ...]:
    env, settings, versions = inputs.env, inputs.settings, inputs.versions
    names = step_names(settings.name)
    pre = render_preprocess_step(
        env, settings, versions[names["preprocess"]], pipeline_input="TEXT",
        outputs=[ctx.tensor_context("X", "float32", [1]), ctx.tensor_context("TEXT_LEN", "int64", [1])],
        comment="Toy: the text's UTF-8 length, as X and as TEXT_LEN.",
        files={"model.py": render_source(env, "model/toy_pre.py.j2", {}).encode()},
    )
    outputs = [ctx.tensor_context("SCALED", "float32", [1]), ctx.tensor_context("LENGTH", "int64", [1])]
    post_config = python_step_config(
        env, names["postprocess"], settings,
        inputs=[ctx.tensor_context("Y", "float32", [1]), ctx.tensor_context("TEXT_LEN", "int64", [1])],
        outputs=outputs, comment="Toy: the model's product and the carried length.",
    )
    post = RenderedModel(names["postprocess"], "postprocess", versions[names["postprocess"]], post_config,
                         {"model.py": render_source(env, "model/toy_post.py.j2", {}).encode()})
    steps = chain_steps(names, pipeline_inputs=["TEXT"], model_inputs=["X"], model_outputs=["Y"],
                        post_inputs={"Y": "Y", "TEXT_LEN": "TEXT_LEN"}, outputs=["SCALED", "LENGTH"], carried=["TEXT_LEN"])
    return render_chain(env, inputs.source, settings, versions, inputs.origin, pre=pre, post=post,
                        ensemble_inputs=[ctx.tensor_context("TEXT", "object", [1])], ensemble_outputs=outputs,
                        steps=steps, comment="Toy: TEXT -> SCALED, LENGTH.", ensemble_files={"README.md": b"toy\n"})


def run_export(params: Mapping[str, Any], settings: ExportSettings) -> OnnxArtifact:
    """The toy model: Y = X * factor."""
    return export_toy(settings.out, float(params.get("factor") or 2.0))


TEXTS = ("", "a", "héllo", "日本語のテキスト", "🙂🙃", "x" * 300)


def _request(items: Sequence[str]) -> Mapping[str, Any]:
    import numpy as np

    return {"TEXT": np.array([[t.encode()] for t in items], dtype=object)}


def check(run: ReferenceRun) -> ReferenceReport:
    """The reference: len(text.encode()) * factor, computed here; factor read from the checkpoint file."""
    factor = float(run.model.read_text())
    texts = [TEXTS[i % len(TEXTS)] for i in range(run.minimum_cases)]
    failures, worst = [], 0.0
    for start in range(0, len(texts), run.max_batch_size):
        batch = texts[start:start + run.max_batch_size]
        out = run.infer(_request(batch))
        for row, text in enumerate(batch):
            want = len(text.encode()) * factor
            worst = max(worst, abs(float(out["SCALED"][row][0]) - want))
            if int(out["LENGTH"][row][0]) != len(text.encode()) or worst > 1e-3:
                failures.append(f"text {start + row}: got {out['SCALED'][row][0]}, {out['LENGTH'][row][0]}")
    return ReferenceReport("toy-length", len(texts), not failures, {"max_abs_diff": worst}, {"max_abs_diff": "<= 1e-3"},
                           tuple(failures[:3]))


FAMILY = Family(
    command="toy-length",
    task=TASK,
    summary="Toy: text in, its length times --factor out.",
    default_name="toy",
    prepare=prepare,
    render=render,
    options=OPTIONS,
    templates=("model/toy_pre.py.j2", "model/toy_post.py.j2"),
    export=FamilyExport("The toy model: Y = X * factor.", OPTIONS, run_export),
    signature_keys=("toy",),
    reference=FamilyReference(check=check, items=lambda n: [TEXTS[i % len(TEXTS)] for i in range(n)], request=_request,
                              load=lambda model, threads: InProcess(lambda items: [len(t.encode()) for t in items], 1), unit="texts"),
)
