"""Pure context building, the strict environment, user templates, and the errors a bad input gets."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from support.render_signatures import image_signature, source_for, text_signature, versions_for

from repo_builder.errors import UserError
from repo_builder.paths import templates_dir
from repo_builder.pipelines.image_classification import render_image_pipeline
from repo_builder.pipelines.settings import PipelineSettings
from repo_builder.pipelines.text_classification import render_text_pipeline
from repo_builder.render import context as ctx
from repo_builder.render.environment import make_environment, pb_string
from repo_builder.render.parse_back import parse_config
from repo_builder.render.render import render_config
from repo_builder.spec import Signature, TensorSpec


@given(st.integers(min_value=1, max_value=4096))
def test_preferred_batch_sizes_fit_max_batch_size_when_any_size(max_batch_size: int) -> None:
    sizes = ctx.preferred_batch_sizes(max_batch_size)
    assert sizes[-1] == max_batch_size
    assert all(1 <= s <= max_batch_size for s in sizes)
    assert list(sizes) == sorted(set(sizes))


def test_preferred_batch_sizes_raise_value_error_when_zero() -> None:
    # The user's --max-batch-size is checked once, by PipelineSettings; here zero is a caller's bug.
    with pytest.raises(ValueError, match="max_batch_size"):
        ctx.preferred_batch_sizes(0)


@given(st.lists(st.integers(min_value=1, max_value=64), min_size=1, max_size=4), st.integers(min_value=1, max_value=128))
def test_ensemble_context_never_exceeds_members_when_asked_for_more(members: list[int], wanted: int) -> None:
    context = ctx.ensemble_context("e", inputs=[], outputs=[], member_max_batch_sizes=members, steps=[], comment="", max_batch_size=wanted)
    assert context["max_batch_size"] == min(min(members), wanted)


@given(st.text(max_size=30))
def test_pb_string_parses_back_when_any_text(text: str) -> None:
    config = parse_config(f"name: {pb_string(text)}", "test")
    assert config.name == text


def test_render_config_raises_user_error_when_context_lacks_a_name(tmp_path: Path) -> None:
    env = make_environment()
    context = ctx.config_context(
        "m", inputs=[], outputs=[], max_batch_size=4, max_queue_delay_us=100, kind="KIND_CPU", comment="c"
    )
    del context["batching"]
    with pytest.raises(UserError, match="batching"):  # StrictUndefined: never an empty string
        render_config(env, "python", context)


def test_user_templates_override_shipped_ones_when_given(tmp_path: Path) -> None:
    user = tmp_path / "templates"
    shutil.copytree(templates_dir(), user)
    path = user / "config" / "python.pbtxt.j2"
    path.write_text(path.read_text().replace("max_batch_size: {{ max_batch_size }}", "max_batch_size: {{ max_batch_size }}\n# custom"))
    sig = image_signature()
    models = render_image_pipeline(
        make_environment(user), source_for(sig, "python"), sig, [str(i) for i in range(1000)], PipelineSettings("r", "python"), versions_for("r")
    )
    assert all("# custom" in m.config_text for m in models if m.role != "ensemble")


def test_user_template_raises_one_line_error_when_config_does_not_parse(tmp_path: Path) -> None:
    user = tmp_path / "templates" / "config"
    user.mkdir(parents=True)
    (user / "ensemble.pbtxt.j2").write_text("name: {{ name | pbstr }}\nnot_a_field: 3\n")
    sig = image_signature()
    with pytest.raises(UserError) as info:
        render_image_pipeline(
            make_environment(tmp_path / "templates"), source_for(sig, "python"), sig, [str(i) for i in range(1000)],
            PipelineSettings("r", "python"), versions_for("r"),
        )  # fmt: skip
    assert "ensemble.pbtxt.j2" in str(info.value) and "\n" not in str(info.value)


def test_user_template_raises_user_error_when_model_py_does_not_compile(tmp_path: Path) -> None:
    user = tmp_path / "templates" / "model"
    user.mkdir(parents=True)
    (user / "classification_postprocess.py.j2").write_text("def broken(:\n")
    sig = image_signature()
    with pytest.raises(UserError, match="does not compile"):
        render_image_pipeline(
            make_environment(tmp_path / "templates"), source_for(sig, "python"), sig, [str(i) for i in range(1000)],
            PipelineSettings("r", "python"), versions_for("r"),
        )  # fmt: skip


def test_make_environment_raises_user_error_when_templates_folder_missing(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="--templates"):
        make_environment(tmp_path / "nope")


def test_image_pipeline_raises_user_error_when_labels_do_not_match_classes() -> None:
    sig = image_signature(num_classes=10)
    with pytest.raises(UserError, match="9 labels for 10 classes"):
        render_image_pipeline(make_environment(), source_for(sig, "python"), sig, ["x"] * 9, PipelineSettings("r", "python"), versions_for("r"))


def test_image_pipeline_raises_user_error_when_input_is_not_the_crop() -> None:
    sig = Signature(
        inputs=(TensorSpec("pixel_values", "float32", ("batch", 3, 300, 300)),),
        outputs=(TensorSpec("logits", "float32", ("batch", 10)),),
        metadata=image_signature().metadata,
    )
    with pytest.raises(UserError, match="cannot fill"):
        render_image_pipeline(make_environment(), source_for(sig, "python"), sig, ["x"] * 10, PipelineSettings("r", "python"), versions_for("r"))


def test_image_preprocess_follows_model_dtype_when_model_is_fp16() -> None:
    sig = image_signature(num_classes=10, dtype="float16")
    models = render_image_pipeline(make_environment(), source_for(sig, "python"), sig, ["x"] * 10, PipelineSettings("r", "python"), versions_for("r"))
    pre, _, post, _ = models
    assert "TYPE_FP16" in pre.config_text and "TYPE_FP16" in post.config_text
    assert "OUTPUT_DTYPE = np.dtype('float16')" in pre.files["model.py"].decode()


def test_image_preprocess_resizes_with_torch_only_when_asked_and_the_filter_has_a_torch_twin() -> None:
    sig = image_signature(num_classes=10)
    render = render_image_pipeline(make_environment(), source_for(sig, "python"), sig, ["x"] * 10, PipelineSettings("r", "python"),
                                   versions_for("r"), resize_with="torch")
    source = render[0].files["model.py"].decode()
    assert "RESIZE_WITH = 'torch'" in source and "torch.nn.functional.interpolate(" in source
    default = render_image_pipeline(make_environment(), source_for(sig, "python"), sig, ["x"] * 10, PipelineSettings("r", "python"), versions_for("r"))
    assert "import torch" not in default[0].files["model.py"].decode()  # Pillow only: no torch needed on the server
    lanczos = {**sig.metadata["preprocess"], "interpolation": "lanczos"}
    with pytest.raises(UserError, match=r"--resize-with torch matches Pillow's bilinear and bicubic resizes only.*lanczos"):
        ctx.image_preprocess_context("p", "m", sig.inputs[0], lanczos, draft_margin=2, origin="signature.json", resize_with="torch")


def test_text_preprocess_emits_model_inputs_when_model_takes_int32_without_token_types(tmp_path: Path) -> None:
    sig = text_signature(int_dtype="int32", token_type_ids=False)
    (tmp_path / "tokenizer.json").write_text("{}")
    models = render_text_pipeline(make_environment(), source_for(sig, "onnxruntime"), sig, ["a", "b", "c"], PipelineSettings("t", "onnxruntime"), versions_for("t"), tmp_path)
    pre = parse_config(models[0].config_text, "pre")
    assert [(o.name, o.data_type) for o in pre.output] == [("input_ids", 8), ("attention_mask", 8)]  # TYPE_INT32
    source = models[0].files["model.py"].decode()
    assert "'input_ids': ['ids', 'int32']" in source and "token_type_ids" not in source
    assert "tokenizer/tokenizer.json" in models[0].files


def test_text_pipeline_raises_user_error_when_input_is_not_a_tokenizer_output(tmp_path: Path) -> None:
    sig = Signature(
        inputs=(TensorSpec("pixel_values", "int64", ("batch", "sequence")),),
        outputs=(TensorSpec("logits", "float32", ("batch", 2)),),
        metadata=text_signature().metadata,
    )
    with pytest.raises(UserError, match="not a tokenizer output"):
        render_text_pipeline(make_environment(), source_for(sig, "python"), sig, ["a", "b"], PipelineSettings("t", "python"), versions_for("t"), tmp_path)


@pytest.mark.parametrize(("field", "value", "message"), [("name", ".hidden", "--name"), ("runtime", "tflite", "--runtime"), ("top_k", 0, "--top-k")])
def test_pipeline_settings_raise_user_error_when_invalid(field: str, value: object, message: str) -> None:
    kwargs = {"name": "ok", "runtime": "python", field: value}
    with pytest.raises(UserError, match=message):
        PipelineSettings(**kwargs)  # type: ignore[arg-type]
