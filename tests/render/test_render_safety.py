"""User strings never become code in generated model.py files, and template failures are one-line errors."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from repo_builder.errors import UserError
from repo_builder.render import context as ctx
from repo_builder.render.environment import make_environment
from repo_builder.render.render import render_source
from repo_builder.spec import TensorSpec

# A tensor name that, pasted raw into a docstring or a string, would close it and run code at import.
HOSTILE = 'x"""\nimport os; os.system("touch /tmp/pwned")\n"""'


def _calls(source: str) -> set[str]:
    return {node.attr for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Attribute)}


def _constants(source: str) -> set[object]:
    return {node.value for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Constant)}


@pytest.mark.parametrize("field", ["name", "model_name", "input_name"])
def test_postprocess_source_keeps_hostile_names_inert_when_a_context_carries_them(field: str) -> None:
    context = ctx.postprocess_context("post", "model", TensorSpec("LOGITS", "float32", ("batch", 3)), 2, 3)
    context[field] = HOSTILE
    source = render_source(make_environment(), "model/classification_postprocess.py.j2", context)
    assert "system" not in _calls(source)  # os.system never became code
    assert 'os.system("touch' not in source.split('"""')[1]  # nor sits in the module docstring as text that closes it
    if field == "input_name":
        assert HOSTILE in _constants(source)  # carried as a repr() literal only


@pytest.mark.parametrize("template", ["model/image_preprocess.py.j2", "model/onnx_python_model.py.j2", "model/text_preprocess.py.j2"])
def test_step_sources_keep_hostile_tensor_names_inert_when_rendered(template: str) -> None:
    if template == "model/image_preprocess.py.j2":
        spec = TensorSpec(HOSTILE, "float32", ("batch", 3, 224, 224))
        preprocess = {"resize": 256, "crop": 224, "mean": [0.5] * 3, "std": [0.5] * 3}
        context = ctx.image_preprocess_context(HOSTILE, HOSTILE, spec, preprocess, draft_margin=2, origin="s")
    elif template == "model/onnx_python_model.py.j2":
        from support.render_signatures import image_signature

        signature = image_signature()
        context = ctx.onnx_python_model_context(HOSTILE, signature)
        context["inputs_map"] = {HOSTILE: "float32"}
    else:
        context = ctx.text_preprocess_context(HOSTILE, HOSTILE, [TensorSpec("input_ids", "int64", ("batch", "seq"))], {"max_length": 8}, "s")
    source = render_source(make_environment(), template, context)
    assert "system" not in _calls(source)


@pytest.mark.parametrize("name", [HOSTILE, "logits\n", "a b", "it's", 'q"uote', "back\\slash", "", "x" * 257])
def test_tensor_context_refuses_the_name_when_it_is_not_a_plain_tensor_name(name: str) -> None:
    with pytest.raises(UserError, match="tensor name"):
        ctx.tensor_context(name, "float32", [3])


@pytest.mark.parametrize("name", ["input.1", "x:0", "/block/out", "logits", "out[0]", "pixel_values"])
def test_tensor_context_accepts_the_name_when_exporters_write_it(name: str) -> None:
    assert ctx.tensor_context(name, "float32", [3])["name"] == name


def _user_templates(tmp_path: Path, text: bytes) -> Path:
    folder = tmp_path / "templates" / "model"
    folder.mkdir(parents=True)
    (folder / "classification_postprocess.py.j2").write_bytes(text)
    return tmp_path / "templates"


def _render_post(templates: Path) -> str:
    context = ctx.postprocess_context("post", "model", TensorSpec("LOGITS", "float32", ("batch", 3)), 2, 3)
    return render_source(make_environment(templates), "model/classification_postprocess.py.j2", context)


def test_render_names_the_template_file_and_line_when_a_user_template_divides_by_zero(tmp_path: Path) -> None:
    templates = _user_templates(tmp_path, b"# fine\nX = {{ 1 / 0 }}\n")
    with pytest.raises(UserError) as info:
        _render_post(templates)
    message = str(info.value)
    assert "\n" not in message
    assert str(templates / "model" / "classification_postprocess.py.j2") in message
    assert "ZeroDivisionError" in message and "line 2" in message


def test_render_names_the_template_file_when_a_user_template_is_not_utf8(tmp_path: Path) -> None:
    templates = _user_templates(tmp_path, b"X = 1  # caf\xe9\n")
    with pytest.raises(UserError, match="not UTF-8") as info:
        _render_post(templates)
    assert str(templates / "model" / "classification_postprocess.py.j2") in str(info.value)
