"""Checks every rendered file passes before it is written: configs parse with Triton's ModelConfig
proto, generated Python compiles."""

from __future__ import annotations

from typing import TYPE_CHECKING

from repo_builder.errors import UserError

if TYPE_CHECKING:
    from tritonclient.grpc import model_config_pb2


def parse_config(text: str, origin: str) -> model_config_pb2.ModelConfig:
    """Parse a rendered config.pbtxt with Triton's own proto; a failure names the template."""
    from google.protobuf import text_format
    from tritonclient.grpc import model_config_pb2

    config: model_config_pb2.ModelConfig = model_config_pb2.ModelConfig()
    try:
        text_format.Parse(text, config)
    except text_format.ParseError as exc:
        raise UserError(f"{origin}: the rendered config does not parse as a Triton ModelConfig ({exc})") from None
    return config


def compile_source(source: str, origin: str) -> None:
    """Compile a rendered model.py (never import or run it): a syntax error names the template."""
    try:
        compile(source, origin, "exec")
    except SyntaxError as exc:
        raise UserError(f"{origin}: the rendered Python does not compile (line {exc.lineno}: {exc.msg})") from None
