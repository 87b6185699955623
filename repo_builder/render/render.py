"""Render one template to text and check it before anyone writes it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from repo_builder.errors import UserError
from repo_builder.render.parse_back import compile_source, parse_config

# Config templates are named after Triton's platform strings ("python" is the backend's name).
CONFIG_TEMPLATES = {
    "python": "config/python.pbtxt.j2",
    "onnxruntime_onnx": "config/onnxruntime_onnx.pbtxt.j2",
    "tensorrt_plan": "config/tensorrt_plan.pbtxt.j2",
    "ensemble": "config/ensemble.pbtxt.j2",
}


def _render(env: Any, template: str, context: Mapping[str, Any]) -> str:
    import jinja2

    try:
        return env.get_template(template).render(**context)
    except jinja2.TemplateNotFound as exc:
        raise UserError(f"template '{exc.name}' not found in the templates folder(s)") from None
    except jinja2.UndefinedError as exc:
        raise UserError(f"template '{template}': {exc.message}") from None
    except jinja2.TemplateSyntaxError as exc:
        raise UserError(f"template '{exc.filename or template}' line {exc.lineno}: {exc.message}") from None


def render_config(env: Any, platform: str, context: Mapping[str, Any]) -> str:
    """Render the config for ``platform`` and parse it back with Triton's ModelConfig proto."""
    template = CONFIG_TEMPLATES.get(platform)
    if template is None:
        raise ValueError(f"no config template for platform '{platform}'")
    text = _render(env, template, context)
    config = parse_config(text, template)
    if config.name != context["name"]:
        raise UserError(f"template '{template}' wrote name '{config.name}', expected '{context['name']}'")
    return text


def render_source(env: Any, template: str, context: Mapping[str, Any]) -> str:
    """Render a model.py and compile it (never import it)."""
    source = _render(env, template, context)
    compile_source(source, template)
    return source
