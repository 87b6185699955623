"""Render one template to text and check it before anyone writes it."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from repo_builder.errors import UserError
from repo_builder.render.parse_back import compile_source, parse_config

# Config templates are named after Triton's platform strings ("python" is the backend's name).
CONFIG_TEMPLATES = {
    "python": "config/python.pbtxt.j2",
    "onnxruntime_onnx": "config/onnxruntime_onnx.pbtxt.j2",
    "tensorrt_plan": "config/tensorrt_plan.pbtxt.j2",
    "dali": "config/dali.pbtxt.j2",
    "ensemble": "config/ensemble.pbtxt.j2",
}


def _template_file(env: Any, template: str) -> str:
    """The file a template name resolves to (a user's --templates copy first), for error messages."""
    for folder in getattr(env.loader, "searchpath", ()):
        path = Path(folder) / template
        if path.is_file():
            return str(path)
    return template


def _render(env: Any, template: str, context: Mapping[str, Any]) -> str:
    """Render one template; every failure is a one-line UserError naming the template file.

    Templates are code (a user's --templates copy runs here): their own runtime errors are user errors.
    """
    import jinja2  # light, but only needed when rendering

    try:
        return env.get_template(template).render(**context)
    except jinja2.TemplateNotFound as exc:
        raise UserError(f"template '{exc.name}' not found in the templates folder(s)") from None
    except jinja2.UndefinedError as exc:
        raise UserError(f"template {_template_file(env, template)}: {exc.message}") from None
    except jinja2.TemplateSyntaxError as exc:
        raise UserError(f"template {exc.filename or _template_file(env, template)} line {exc.lineno}: {exc.message}") from None
    except UnicodeDecodeError as exc:
        raise UserError(f"template {_template_file(env, template)}: not UTF-8 text ({exc.reason} at byte {exc.start}); save it as UTF-8") from None
    except UserError:
        raise
    except Exception as exc:  # {{ 1/0 }}, a filter refusing a value ...: the template's own error
        line = _template_line(exc, template)
        where = f" line {line}" if line else ""
        message = " ".join(str(exc).split())[:300] or type(exc).__name__
        raise UserError(f"template {_template_file(env, template)}{where}: {type(exc).__name__}: {message}") from None


def _template_line(exc: BaseException, template: str) -> int | None:
    """The template line of a render-time error (Jinja2 maps its frames back to template lines)."""
    tb = exc.__traceback__
    line = None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename.endswith(template):
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


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


def render_text(env: Any, template: str, context: Mapping[str, Any]) -> str:
    """Render a text file that is not code (a step's README.md)."""
    return _render(env, template, context)
