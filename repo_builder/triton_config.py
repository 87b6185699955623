"""The one reader of Triton's model configuration (``config.pbtxt``), parsed with Triton's own proto.

Every place that turns config text into a ``ModelConfig`` comes here: validate's scan (untrusted files:
``read_config_file`` reads through the guarded reader, bounded), the writer and compile-pending (configs
repo-builder wrote), render's parse-back, bench, tune and the stand-ins. ``tests/core/test_triton_config.py``
fails when another module calls protobuf's text parser itself.

The proto module is imported through ``lazy_pb2`` so that offline validate never runs
``tritonclient.grpc``'s heavy ``__init__``.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, NamedTuple

from repo_builder.errors import UserError
from repo_builder.guarded_read import CONFIG, UnsafeFile, read_repository_file
from repo_builder.lazy_pb2 import import_pb2
from repo_builder.triton_layout import CONFIG_FILE

if TYPE_CHECKING:
    from tritonclient.grpc.model_config_pb2 import ModelConfig

__all__ = ["MAX_CONFIG_BYTES", "ConfigParseError", "ConfigRead", "config_from_bytes", "new_config", "parse_config_text", "read_config_file", "versions_to_load"]

# Triton sets no size limit of its own: core reads the whole file into a string and hands it to
# protobuf's text parser (model_config_utils.cc, ReadTextProto), which stops near 2 GiB. Configs with
# thousands of inline labels or warmup values reach tens of MB; 64 MiB keeps every realistic config and
# still bounds what one file can cost a CI gate.
MAX_CONFIG_BYTES = CONFIG.limit
_PB2 = "tritonclient.grpc.model_config_pb2"


class ConfigParseError(UserError):
    """Config text that Triton's proto refuses; ``detail`` is the parser's words, ``line``/``column`` 1-based."""

    def __init__(self, origin: str, detail: str, line: int | None, column: int | None) -> None:
        super().__init__(f"{origin}: does not parse as a Triton ModelConfig ({detail})")
        self.detail, self.line, self.column = detail, line, column


class ConfigRead(NamedTuple):
    """What reading one ``config.pbtxt`` gave: the proto, the text, or a problem in words (and where)."""

    config: ModelConfig | None
    text: str | None  # None when the file could not be read (missing, unsafe, not UTF-8)
    problem: str | None
    line: int | None = None
    column: int | None = None


def new_config() -> ModelConfig:
    """An empty ``ModelConfig`` (the proto class, imported cheaply)."""
    config: ModelConfig = import_pb2(_PB2).ModelConfig()
    return config


_parser: tuple[ModuleType, type[ModelConfig]] | None = None


def _config_parser() -> tuple[ModuleType, type[ModelConfig]]:
    """protobuf's ``text_format`` and the proto class, looked up once: a scan parses thousands of configs,
    and a function-level ``from ... import`` plus ``new_config`` cost about a microsecond each time."""
    global _parser
    if _parser is None:
        from google.protobuf import text_format  # with the proto module: cheap, and only when parsing

        _parser = (text_format, import_pb2(_PB2).ModelConfig)
    return _parser


def parse_config_text(text: str, origin: str) -> ModelConfig:
    """Parse config text with Triton's proto; raises ``ConfigParseError`` naming ``origin``."""
    text_format, config_class = _parser if _parser is not None else _config_parser()
    config = config_class()
    try:
        text_format.Parse(text, config)
    except text_format.ParseError as exc:
        raise ConfigParseError(origin, str(exc), exc.GetLine(), exc.GetColumn()) from None
    except Exception as exc:  # protobuf's own limits (recursion depth, bad UTF-8 in a string literal)
        raise ConfigParseError(origin, str(exc) or type(exc).__name__, None, None) from None
    return config


def read_config_file(path: Path, root: Path | None = None) -> ConfigRead:
    """Read and parse ``config.pbtxt`` at ``path``, a file of an untrusted repository.

    Only a regular file inside ``root`` (default: the repository holding the model folder) is read, at
    most ``MAX_CONFIG_BYTES`` of it, through the guarded reader; a problem never quotes a link's target.
    """
    try:
        raw = read_repository_file(path, root if root is not None else path.parent.parent, CONFIG, CONFIG_FILE)
    except UnsafeFile as exc:
        return ConfigRead(None, None, str(exc))
    return config_from_bytes(raw)


def config_from_bytes(raw: bytes) -> ConfigRead:
    """``read_config_file``'s verdict on bytes the guarded reader returned (validate's scan reads them
    relative to the model folder's descriptor)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return ConfigRead(None, None, f"{CONFIG_FILE} is not UTF-8 text (byte {exc.start})")
    try:
        config = parse_config_text(text, CONFIG_FILE)
    except ConfigParseError as exc:
        return ConfigRead(None, text, f"failed to parse {CONFIG_FILE}: {exc.detail}", exc.line, exc.column)
    return ConfigRead(config, text, None)


def versions_to_load(config: ModelConfig | None, present: Iterable[int]) -> tuple[int, ...]:
    """The versions Triton loads from the ``present`` version folders under ``config``'s version policy.

    Mirrors core's ``VersionsToLoad`` (model_lifecycle.cc): no policy means the latest one; a ``specific``
    version without its folder is skipped; ``latest`` takes the ``num_versions`` greatest; a policy with no
    choice set means all. Sorted ascending. The one implementation: validate (per scanned model) and the
    writer (which versions a config it replaces served) both call it.
    """
    existing = sorted(set(present), reverse=True)
    if config is None or not config.HasField("version_policy"):
        return tuple(existing[:1])
    policy = config.version_policy
    choice = policy.WhichOneof("policy_choice")
    if choice == "specific":
        return tuple(sorted(set(policy.specific.versions) & set(existing)))
    if choice == "latest":
        return tuple(sorted(existing[: max(policy.latest.num_versions, 0)]))
    return tuple(sorted(existing))
