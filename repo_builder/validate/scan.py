"""Scan a repository folder once into a ``Repository`` value (the only filesystem walk of validate)."""

from __future__ import annotations

import os
from pathlib import Path

from repo_builder.validate.model import FileEntry, ModelEntry, Repository, VersionDir

CONFIG_FILE = "config.pbtxt"
# Bigger than any real config by orders of magnitude; reading more would only stall a CI gate.
MAX_CONFIG_BYTES = 8 * 1024 * 1024
# Folders Triton keeps beside version folders and never treats as versions.
RESERVED_DIRS = frozenset({"warmup", "initial_state", "configs"})


def parse_version_name(name: str) -> tuple[int | None, str | None]:
    """Mirror Triton's version-folder parsing: (version, None) or (None, Triton's warning).

    Triton rejects a leading zero first, then converts with ``std::stoll``, which accepts leading
    blanks, a sign and trailing garbage ("1a" is version 1) and fails on overflow.
    """
    if name in RESERVED_DIRS:
        return None, f"'{name}' is a reserved folder, not a version"
    if len(name) > 1 and name[0] == "0":
        return None, f"ignore version directory '{name}' which contains leading zeros in its directory name"
    text = name.lstrip(" \t\n\v\f\r")
    i = 1 if text[:1] in ("+", "-") else 0
    j = i
    while j < len(text) and text[j].isascii() and text[j].isdigit():
        j += 1
    fails = f"ignore version directory '{name}' which fails to convert to integral number"
    if j == i:
        return None, fails
    value = int(text[:j])
    if not -(2**63) <= value < 2**63:
        return None, fails
    return value, None


def _entry(path: Path, root: Path) -> FileEntry:
    name = path.name
    try:
        is_link = path.is_symlink()
        st = path.stat()  # follows links, as Triton does
        is_dir = os.path.isdir(path)
    except OSError:
        return FileEntry(name, is_dir=False, size=None, escapes=is_link if "is_link" in locals() else False)
    escapes = False
    if is_link:
        try:
            path.resolve().relative_to(root)
        except (ValueError, OSError):
            escapes = True
    return FileEntry(name, is_dir=is_dir, size=None if is_dir else st.st_size, escapes=escapes)


def _list(path: Path, root: Path) -> tuple[tuple[FileEntry, ...], str | None]:
    try:
        children = sorted(path.iterdir(), key=lambda p: p.name)
    except OSError as exc:
        return (), f"cannot list {path}: {exc.strerror or exc}"
    return tuple(_entry(c, root) for c in children), None


def read_config(path: Path) -> tuple[object | None, str | None, str | None, int | None, int | None]:
    """Parse ``config.pbtxt`` with Triton's own proto: (config, text, problem, line, column)."""
    from google.protobuf import text_format
    from tritonclient.grpc import model_config_pb2

    try:
        if path.is_dir():
            return None, None, f"{CONFIG_FILE} is a folder, not a file", None, None
        size = path.stat().st_size
        if size > MAX_CONFIG_BYTES:
            return None, None, f"{CONFIG_FILE} is {size} bytes, over the {MAX_CONFIG_BYTES}-byte limit; is it really a model config?", None, None
        raw = path.read_bytes()
    except OSError as exc:
        return None, None, f"cannot read {CONFIG_FILE}: {exc.strerror or exc}", None, None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return None, None, f"{CONFIG_FILE} is not UTF-8 text (byte {exc.start})", None, None
    config = model_config_pb2.ModelConfig()
    try:
        text_format.Parse(text, config)
    except text_format.ParseError as exc:
        line, column = exc.GetLine(), exc.GetColumn()
        message = str(exc)
        return None, text, f"failed to parse {CONFIG_FILE}: {message}", line, column
    except Exception as exc:
        return None, text, f"failed to parse {CONFIG_FILE}: {exc}", None, None
    return config, text, None, None, None


def scan_model(path: Path, root: Path) -> ModelEntry:
    name = path.name
    config_path = path / CONFIG_FILE
    files, problem = _list(path, root)
    if problem is None and path.is_symlink():
        try:
            path.resolve().relative_to(root)
        except (ValueError, OSError):
            problem = f"model folder '{name}' is a symlink that leaves the repository"
    config = text = cproblem = None
    line = column = None
    if any(f.name == CONFIG_FILE for f in files):
        config, text, cproblem, line, column = read_config(config_path)
    versions: list[VersionDir] = []
    for f in files:
        if not f.is_dir:
            continue
        number, ignored = parse_version_name(f.name)
        vfiles, vproblem = _list(path / f.name, root)
        versions.append(VersionDir(f.name, path / f.name, number, ignored or vproblem, vfiles))
    return ModelEntry(
        name=name,
        path=path,
        config_path=config_path,
        config=config,
        config_text=text,
        config_problem=cproblem,
        config_line=line,
        config_column=column,
        versions=tuple(versions),
        files=files,
        problem=problem,
    )


def scan_repository(location: str | Path) -> Repository:
    """Scan a local repository folder. Raises ``UserError`` if it is not a readable folder."""
    from repo_builder.errors import UserError

    root = Path(location)
    if not root.exists():
        raise UserError(f"{root}: no such folder; pass the model repository's path")
    if not root.is_dir():
        raise UserError(f"{root}: not a folder; pass the model repository's path")
    root = root.resolve()
    entries, problem = _list(root, root)
    if problem:
        raise UserError(f"{root}: {problem}")
    models = tuple(scan_model(root / e.name, root) for e in entries if e.is_dir)
    return Repository(root=root, models=models, location=str(location))
