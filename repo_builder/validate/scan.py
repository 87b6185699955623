"""Scan a repository folder once into a ``Repository`` value (the only filesystem walk of validate)."""

from __future__ import annotations

import os
import stat
import sys
import types
from pathlib import Path
from typing import Any

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


def _entry(entry: os.DirEntry[str], root: Path) -> FileEntry:
    # os.scandir's entries know their type without a syscall; only sizes and symlink targets cost one.
    name = entry.name
    is_link = False
    try:
        is_link = entry.is_symlink()
        is_dir = entry.is_dir()  # follows links, as Triton does
        size = None if is_dir else entry.stat().st_size  # raises for a dangling link
    except OSError:
        return FileEntry(name, is_dir=False, size=None, escapes=is_link)
    escapes = False
    if is_link:
        try:
            Path(entry.path).resolve().relative_to(root)
        except (ValueError, OSError):
            escapes = True
    return FileEntry(name, is_dir=is_dir, size=size, escapes=escapes)


def _list(path: Path, root: Path) -> tuple[tuple[FileEntry, ...], str | None]:
    try:
        with os.scandir(path) as it:
            children = sorted(it, key=lambda e: e.name)
        return tuple(_entry(c, root) for c in children), None
    except OSError as exc:
        return (), f"cannot list {path}: {exc.strerror or exc}"


# Packages whose __init__ is expensive and irrelevant to validate: importing a pb2 module from them
# installs the package as a stand-in that runs its real __init__ only when something else is used.
_DEFERRED_PACKAGES = frozenset({"tritonclient.grpc"})


class _DeferredPackage(types.ModuleType):
    """A package whose ``__init__`` has not run yet; the first missing attribute runs it in place."""

    def __getattr__(self, name: str) -> Any:
        self.__class__ = types.ModuleType  # from here on an ordinary module
        try:
            self.__spec__.loader.exec_module(self)
        except BaseException:
            sys.modules.pop(self.__name__, None)  # a later import retries from scratch
            raise
        return getattr(self, name)


def _deferred_package(package: str) -> types.ModuleType | None:
    import importlib.util

    module = sys.modules.get(package)
    if module is not None:
        return module
    if package not in _DEFERRED_PACKAGES:
        return None
    spec = importlib.util.find_spec(package)  # imports the parent (tritonclient: an empty __init__)
    if spec is None or spec.loader is None or not spec.submodule_search_locations:
        return None
    module = importlib.util.module_from_spec(spec)
    module.__class__ = _DeferredPackage
    sys.modules[package] = module
    parent, _, leaf = package.rpartition(".")
    if parent in sys.modules:
        setattr(sys.modules[parent], leaf, module)
    return module


def import_pb2(qualified_name: str) -> Any:
    """Import a generated ``*_pb2`` module without running its package's ``__init__``.

    ``tritonclient.grpc``'s ``__init__`` pulls in grpc, numpy and more (0.2 s or so), and ``onnx``'s its
    C++ extension; validate only needs the protobuf classes. The module is registered under its real
    name, so a later ordinary import reuses it instead of registering its protos twice. For
    ``tritonclient.grpc`` the package itself is registered as a stand-in holding the module, so that
    ``from tritonclient.grpc import model_config_pb2`` anywhere stays cheap, while any other use of the
    package (the gRPC client of ``validate --live``) runs its real ``__init__`` first.
    """
    module = sys.modules.get(qualified_name)
    if module is not None:
        return module
    import importlib.util

    package, _, leaf = qualified_name.rpartition(".")
    top = package.split(".")[0]
    spec = importlib.util.find_spec(top)
    if spec is None or not spec.submodule_search_locations:
        return importlib.import_module(qualified_name)
    file = Path(spec.submodule_search_locations[0], *package.split(".")[1:], f"{leaf}.py")
    if not file.is_file():
        return importlib.import_module(qualified_name)
    module_spec = importlib.util.spec_from_file_location(qualified_name, file)
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[qualified_name] = module
    try:
        module_spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[qualified_name]
        raise
    holder = _deferred_package(package)
    if isinstance(holder, _DeferredPackage):
        object.__setattr__(holder, leaf, module)
    return module


def read_config(path: Path) -> tuple[object | None, str | None, str | None, int | None, int | None]:
    """Parse ``config.pbtxt`` with Triton's own proto: (config, text, problem, line, column)."""
    from google.protobuf import text_format

    model_config_pb2 = import_pb2("tritonclient.grpc.model_config_pb2")

    try:
        st = path.stat()
        if stat.S_ISDIR(st.st_mode):
            return None, None, f"{CONFIG_FILE} is a folder, not a file", None, None
        if not stat.S_ISREG(st.st_mode):  # a FIFO would block the read forever, a device never end
            return None, None, f"{CONFIG_FILE} is not a regular file (a pipe or a device?)", None, None
        size = st.st_size
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


ConfigResult = tuple[Any, str | None, str | None, int | None, int | None]
# Below this many configs a second process costs more than it saves.
PARALLEL_MIN_CONFIGS = 200


def _parse_in_child(paths: list[Path]) -> list[tuple[bytes | None, str | None, str | None, int | None, int | None]]:
    out = []
    for path in paths:
        config, text, problem, line, column = read_config(path)
        out.append((config.SerializeToString() if config is not None else None, text, problem, line, column))
    return out


def _can_fork() -> bool:
    import threading

    if not hasattr(os, "fork") or threading.active_count() > 1:  # forking a threaded process can deadlock
        return False
    try:
        return len(os.sched_getaffinity(0)) > 1
    except (AttributeError, OSError):
        return (os.cpu_count() or 1) > 1


def read_configs(paths: list[Path]) -> list[ConfigResult]:
    """``read_config`` for many files; big repositories are parsed by two processes.

    Parsing text protos is pure Python and dominates a scan, so with more than one CPU a forked child
    parses the second half and hands the binary protos back through a pipe. Any failure of the child
    falls back to parsing in this process.
    """
    if len(paths) < PARALLEL_MIN_CONFIGS or not _can_fork():
        return [read_config(p) for p in paths]
    import pickle

    import_pb2("tritonclient.grpc.model_config_pb2")  # import once, before the fork
    from google.protobuf import text_format  # noqa: F401 - same reason

    half = len(paths) // 2
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: parse the second half, send it, leave without running any cleanup
        status = 1
        try:
            os.close(read_fd)
            data = pickle.dumps(_parse_in_child(paths[half:]), protocol=pickle.HIGHEST_PROTOCOL)
            with os.fdopen(write_fd, "wb") as fh:
                fh.write(data)
            status = 0
        finally:
            os._exit(status)
    os.close(write_fd)
    first = [read_config(p) for p in paths[:half]]
    with os.fdopen(read_fd, "rb") as fh:
        data = fh.read()
    _, status = os.waitpid(pid, 0)
    try:
        if status != 0:
            raise ValueError("config parser process failed")
        model_config_pb2 = import_pb2("tritonclient.grpc.model_config_pb2")
        second = [
            (model_config_pb2.ModelConfig.FromString(raw) if raw is not None else None, text, problem, line, column)
            for raw, text, problem, line, column in pickle.loads(data)
        ]
    except Exception:  # the child died or sent garbage: do its share here
        second = [read_config(p) for p in paths[half:]]
    return first + second


def scan_model(
    path: Path,
    root: Path,
    listing: tuple[tuple[FileEntry, ...], str | None] | None = None,
    config_result: ConfigResult | None = None,
) -> ModelEntry:
    """Scan one model folder (``listing`` and ``config_result`` when the caller already has them)."""
    name = path.name
    config_path = path / CONFIG_FILE
    files, problem = listing if listing is not None else _list(path, root)
    if problem is None and path.is_symlink():
        try:
            path.resolve().relative_to(root)
        except (ValueError, OSError):
            problem = f"model folder '{name}' is a symlink that leaves the repository"
    config = text = cproblem = None
    line = column = None
    if any(f.name == CONFIG_FILE for f in files):
        config, text, cproblem, line, column = config_result if config_result is not None else read_config(config_path)
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
    folders = [root / e.name for e in entries if e.is_dir]
    listings = [_list(folder, root) for folder in folders]
    with_config = [
        folder / CONFIG_FILE
        for folder, (files, _) in zip(folders, listings, strict=True)
        if any(f.name == CONFIG_FILE for f in files)
    ]
    configs = dict(zip(with_config, read_configs(with_config), strict=True))
    models = tuple(
        scan_model(folder, root, listing, configs.get(folder / CONFIG_FILE))
        for folder, listing in zip(folders, listings, strict=True)
    )
    return Repository(root=root, models=models, location=str(location))
