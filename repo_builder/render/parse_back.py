"""Checks every rendered file passes before it is written: configs parse with Triton's ModelConfig
proto, generated Python compiles."""

from __future__ import annotations

from typing import TYPE_CHECKING

from repo_builder.errors import UserError
from repo_builder.triton_config import ConfigParseError, parse_config_text

if TYPE_CHECKING:
    from tritonclient.grpc import model_config_pb2


def parse_config(text: str, origin: str) -> model_config_pb2.ModelConfig:
    """Parse a rendered config.pbtxt with Triton's own proto; a failure names the template."""
    try:
        return parse_config_text(text, origin)
    except ConfigParseError as exc:
        raise UserError(f"{origin}: the rendered config does not parse as a Triton ModelConfig ({exc.detail})") from None


def compile_source(source: str, origin: str) -> None:
    """Compile a rendered model.py (never import or run it): a syntax error names the template."""
    try:
        compile(source, origin, "exec")
    except SyntaxError as exc:
        raise UserError(f"{origin}: the rendered Python does not compile (line {exc.lineno}: {exc.msg})") from None
