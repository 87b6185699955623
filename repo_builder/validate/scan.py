"""Scan a repository folder once into a ``Repository`` value (the only filesystem walk of validate)."""

from __future__ import annotations

import operator
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from repo_builder.errors import UserError
from repo_builder.guarded_read import CONFIG, UnsafeFile, open_folder_at, open_root, read_entry_stat_at
from repo_builder.lazy_pb2 import import_pb2
from repo_builder.triton_config import MAX_CONFIG_BYTES, config_from_bytes, read_config_file
from repo_builder.triton_layout import CONFIG_FILE, SKIPPED_VERSION_FOLDERS
from repo_builder.validate.analysis.files import resolves_inside
from repo_builder.validate.records import FileEntry, ModelEntry, Repository, VersionDir

if TYPE_CHECKING:
    from tritonclient.grpc.model_config_pb2 import ModelConfig

__all__ = ["CONFIG_FILE", "MAX_CONFIG_BYTES", "import_pb2", "list_folder", "parse_version_name", "read_config", "scan_repository"]

RESERVED_DIRS = SKIPPED_VERSION_FOLDERS  # the older name, kept for callers


read_config = read_config_file  # the one config reader (repo_builder/triton_config.py), under the name validate uses


def parse_version_name(name: str) -> tuple[int | None, str | None]:
    """Mirror Triton's version-folder parsing: (version, None) or (None, Triton's warning).

    Triton rejects a leading zero first, then converts with ``std::stoll``, which accepts leading
    blanks, a sign and trailing garbage ("1a" is version 1) and fails on overflow.
    """
    if name in RESERVED_DIRS:
        return None, f"'{name}' is a reserved folder, not a version"
    if len(name) > 1 and name[0] == "0":
        return None, f"ignore version directory '{name}' which contains leading zeros in its directory name"
    if name.isascii() and name.isdigit():  # the common case ("1"): what the general path below gives it
        value = int(name)
        if value < 2**63:
            return value, None
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
    try:  # the common case first: no link (any error: the full path below decides)
        if not entry.is_symlink():
            if entry.is_dir():
                return FileEntry(entry.name, True)
            found = entry.stat()
            return FileEntry(entry.name, False, found.st_size, mtime_ns=found.st_mtime_ns)
    except OSError:
        pass
    name = entry.name
    is_link = False
    try:
        is_link = entry.is_symlink()
        is_dir = entry.is_dir()  # follows links, as Triton does
        st = None if is_dir else entry.stat()  # raises for a dangling link
    except OSError:  # a dangling link (or a loop): escaping when its target would lie outside
        escapes = is_link and not _target_inside(entry.path, root)
        return FileEntry(name, is_dir=False, size=None, escapes=escapes, broken=is_link and not escapes, link=is_link)
    escapes = is_link and not resolves_inside(Path(entry.path), root)
    if escapes or st is None:
        return FileEntry(name, is_dir=is_dir, size=None, escapes=escapes, link=is_link)
    return FileEntry(name, is_dir=False, size=st.st_size, mtime_ns=st.st_mtime_ns, link=is_link)


def _target_inside(link: str, root: Path) -> bool:
    """Whether a link that cannot be resolved (dangling, a loop) names a place inside ``root``."""
    try:
        target = os.path.normpath(os.path.join(os.path.dirname(link), os.readlink(link)))
    except (OSError, ValueError):
        return False
    return Path(target).is_relative_to(root)


_by_name = operator.attrgetter("name")


def _list(path: Path, root: Path) -> tuple[tuple[FileEntry, ...], str | None]:
    try:
        with os.scandir(path) as it:
            children = sorted(it, key=_by_name)
        return tuple([_entry(c, root) for c in children]), None
    except OSError as exc:
        return (), f"cannot list {path}: {exc.strerror or exc}"


def list_folder(path: Path, root: Path, limit: int) -> tuple[tuple[FileEntry, ...], bool, str | None]:
    """A folder below a version folder listed like the scan's own folders (links judged, never followed
    out of ``root``), for the rules that look one level deeper (a step's ``site-packages``): at most
    ``limit`` entries, sorted. Returns (entries, whether some were left out, why it cannot be listed)."""
    kept: list[os.DirEntry[str]] = []
    truncated = False
    try:
        with os.scandir(path) as it:
            for child in it:
                if len(kept) == limit:
                    truncated = True
                    break
                kept.append(child)
    except OSError as exc:
        return (), False, f"cannot list {path.name}: {exc.strerror or exc}"
    kept.sort(key=_by_name)
    return tuple(_entry(c, root) for c in kept), truncated, None


def _files_at(fd: int) -> tuple[tuple[FileEntry, ...], bool] | None:
    """The records of the folder open as ``fd`` (sorted by name) and whether every name is ASCII, when none
    of its entries is a link; None otherwise: links are judged by the path-based ``_list`` (where they lead),
    as are errors (its words)."""
    out = []
    ascii_names = True
    try:
        with os.scandir(fd) as it:
            children = sorted(it, key=_by_name)
        for c in children:
            # Types come from the listing (no syscall unless the file system gives none).
            if c.is_symlink():
                return None
            name = c.name
            ascii_names = ascii_names and name.isascii()
            if c.is_dir():
                out.append(FileEntry(name, True))
            else:
                found = c.stat()  # size and mtime: RB405, the version rules and the ONNX memo use them
                out.append(FileEntry(name, False, found.st_size, mtime_ns=found.st_mtime_ns))
    except OSError:
        return None
    return tuple(out), ascii_names


def _list_at(parent_fd: int, name: str) -> tuple[tuple[FileEntry, ...], bool] | None:
    """Folder ``name`` of the folder open as ``parent_fd``, listed through a descriptor of its own (opened
    without following a link), with ``_files_at``'s ASCII flag; None when the path-based ``_list`` must
    decide (a link, an error)."""
    try:
        fd = open_folder_at(parent_fd, name)
    except (OSError, ValueError):
        return None
    try:
        return _files_at(fd)
    finally:
        os.close(fd)


ConfigResult = tuple["ModelConfig | None", str | None, str | None, int | None, int | None]
# Below this many model folders a second process costs more than it saves (a fork and a pipe: a few ms).
PARALLEL_MIN_CONFIGS = 200


def _parse_in_child(paths: list[Path], root: Path) -> list[tuple[bytes | None, str | None, str | None, int | None, int | None]]:
    out = []
    for path in paths:
        config, text, problem, line, column = read_config(path, root)
        out.append((config.SerializeToString() if config is not None else None, text, problem, line, column))
    return out


def _single_threaded() -> bool:
    """Whether this process has exactly one thread, counting threads that Python did not start.

    Forking a process with other threads can deadlock the child on a lock one of them held. Native
    libraries (gRPC, onnxruntime, OpenMP) start threads ``threading`` never sees, so on Linux the
    kernel's own list is asked; elsewhere only Python's threads can be counted.
    """
    import threading

    if threading.active_count() > 1:
        return False
    try:
        return len(os.listdir("/proc/self/task")) == 1
    except OSError:
        return sys.platform != "darwin"  # macOS frameworks are not fork-safe whatever the thread count


def _can_fork() -> bool:
    if not hasattr(os, "fork") or not _single_threaded():
        return False
    try:
        return len(os.sched_getaffinity(0)) > 1
    except (AttributeError, OSError):
        return (os.cpu_count() or 1) > 1


class _ChildParse:
    """A forked process running ``read_config`` over some paths while this one goes on working.

    The child sends the binary protos back through a pipe (``marshal``: plain tuples of bytes, str, int
    and None) and leaves with ``os._exit``, running no cleanup of this process's. ``result`` and
    ``abandon`` always reap it, so no zombie is left whatever happens.
    """

    def __init__(self, pid: int, fd: int, count: int) -> None:
        self.pid, self.fd, self.count = pid, fd, count

    @classmethod
    def start(cls, paths: list[Path]) -> _ChildParse | None:
        """Fork a child parsing ``paths``; None when no fork is possible (call ``_can_fork`` first)."""
        import marshal

        import_pb2("tritonclient.grpc.model_config_pb2")  # import once, before the fork
        from google.protobuf import text_format  # noqa: F401 - same reason

        read_fd, write_fd = os.pipe()
        try:
            pid = os.fork()
        except OSError:  # no process left (EAGAIN) or no memory: the caller parses everything
            os.close(read_fd)
            os.close(write_fd)
            return None
        if pid == 0:  # child: parse, send, leave without running any cleanup
            status = 1
            try:
                os.close(read_fd)
                data = marshal.dumps(_parse_in_child(paths, paths[0].parent.parent))
                with os.fdopen(write_fd, "wb") as fh:
                    fh.write(data)
                status = 0
            finally:
                os._exit(status)
        os.close(write_fd)
        return cls(pid, read_fd, len(paths))

    def result(self) -> list[ConfigResult] | None:
        """The child's results, or None when it failed or sent something unreadable."""
        import marshal

        try:
            with os.fdopen(self.fd, "rb") as fh:
                data = fh.read()
        finally:
            status = self._reap(kill=False)
        if status != 0:
            return None
        model_config_pb2 = import_pb2("tritonclient.grpc.model_config_pb2")
        try:
            out = [
                (model_config_pb2.ModelConfig.FromString(raw) if raw is not None else None, text, problem, line, column)
                for raw, text, problem, line, column in marshal.loads(data)
            ]
        except Exception:  # garbage from a child that went wrong
            return None
        return out if len(out) == self.count else None

    def abandon(self) -> None:
        """Stop the child: its answer is no longer wanted (this process is failing or interrupted)."""
        os.close(self.fd)
        self._reap(kill=True)

    def _reap(self, kill: bool) -> int:
        import contextlib
        import signal

        if kill:
            with contextlib.suppress(OSError):  # it may have exited already
                os.kill(self.pid, signal.SIGKILL)
        while True:
            try:
                return os.waitpid(self.pid, 0)[1]
            except InterruptedError:
                continue
            except ChildProcessError:  # already reaped (a SIGCHLD handler that waits): status unknown
                return -1


# Three pathlib joins per model were a tenth of what the scan adds to the parse (about 2 microseconds each:
# ``/`` parses its argument). A listed name is one component already (no separator, never "." or ".."), so
# the child is made without parsing where the interpreter offers it (pathlib's own directory walk uses it,
# Python 3.10 to 3.12); elsewhere the plain join.
_make_child = getattr(Path, "_make_child_relpath", None)


def _child(path: Path, name: str) -> Path:
    """``path / name`` for ``name`` a single component the scan listed (or ``config.pbtxt``)."""
    return _make_child(path, name) if _make_child is not None else path / name


def child_text(parent: Path, name: str) -> str:
    """``str(_child(parent, name))`` from the parent's text (kept by the Path once formatted), without
    formatting the child."""
    text = str(parent)
    if text == ".":
        return name
    return text + name if text.endswith(os.sep) else text + os.sep + name


def _versions(path: Path, root: Path, files: tuple[FileEntry, ...]) -> tuple[VersionDir, ...]:
    """The model folder's subfolders listed the path-based way (links judged by where they lead)."""
    versions: list[VersionDir] = []
    for f in files:
        if not f.is_dir:
            continue
        number, ignored = parse_version_name(f.name)
        vpath = _child(path, f.name)
        # A version folder linking out of the repository is never listed (RB103 reports the link).
        vfiles, vproblem = ((), None) if f.escapes else _list(vpath, root)
        versions.append(VersionDir(f.name, vpath, number, ignored or vproblem, vfiles))
    return tuple(versions)


def _escapes(path: Path, root: Path) -> bool:
    return path.is_symlink() and not resolves_inside(path, root)


def scan_model(
    path: Path,
    root: Path,
    listing: tuple[tuple[FileEntry, ...], str | None] | None = None,
    config_result: ConfigResult | None = None,
    *,
    escapes: bool | None = None,
    config_path: Path | None = None,
) -> ModelEntry:
    """Scan one model folder (``listing``, ``config_result``, whether the folder is a symlink that
    ``escapes`` the repository and its ``config_path`` when the caller already has them).

    A model folder that links out of the repository is neither listed nor read: nothing of what it
    points at reaches a report.
    """
    name = path.name
    if config_path is None:
        config_path = path / CONFIG_FILE
    if escapes is None:
        escapes = _escapes(path, root)
    if escapes:
        problem: str | None = f"model folder '{name}' is a symlink that leaves the repository; validate does not follow it"
        return ModelEntry(name=name, path=path, config_path=config_path, config=None, problem=problem)
    files, problem = listing if listing is not None else _list(path, root)
    config = text = cproblem = None
    line = column = None
    entry = next((f for f in files if f.name == CONFIG_FILE), None)
    if entry is not None and entry.escapes:
        cproblem = f"{CONFIG_FILE} is a symlink that leaves the repository; not read"
    elif entry is not None:
        config, text, cproblem, line, column = config_result if config_result is not None else read_config(config_path, root)
    return ModelEntry(
        name=name,
        path=path,
        config_path=config_path,
        config=config,
        config_text=text,
        config_problem=cproblem,
        config_line=line,
        config_column=column,
        versions=_versions(path, root, files),
        files=files,
        problem=problem,
    )


# A folder of the repository: its name, whether it is a symlink, whether it leaves the repository.
_Folder = tuple[str, bool, bool]


def _root_listing(root: Path) -> tuple[list[_Folder], tuple[FileEntry, ...]]:
    """The repository's folders and its plain files (``_list``'s records), sorted; ``UserError`` when it
    cannot be listed. A plain folder needs no record of its own: only its name reaches the scan."""
    try:
        with os.scandir(root) as it:
            children = sorted(it, key=_by_name)
    except OSError as exc:
        raise UserError(f"{root}: cannot list {root}: {exc.strerror or exc}") from None
    folders: list[_Folder] = []
    files: list[FileEntry] = []
    for c in children:
        try:  # the common case first: a folder that is no link (types from the listing)
            plain = not c.is_symlink() and c.is_dir()
        except OSError:
            plain = False
        if plain:
            folders.append((c.name, False, False))
            continue
        found = _entry(c, root)
        if found.is_dir:
            folders.append((found.name, found.link, found.escapes))
        else:
            files.append(found)
    return folders, tuple(files)


# What ``_listed_at`` found in a model folder: its entries, its version folders, whether config.pbtxt is
# listed, the config's bytes when the guarded read took them, and whether the listing is plain (no link,
# ASCII names).
_Listed = tuple[tuple[FileEntry, ...], tuple[VersionDir, ...], bool, "bytes | None", bool]
_NO_CONFIG: ConfigResult = (None, None, None, None, None)


def _listed_model(entry: _Folder, folder: Path, root: Path, root_fd: int, read: bool) -> _Listed | None:
    """The model folder ``entry`` listed through a descriptor of its own (opened once without following a
    link; its listing, config and version folders read relative to it, not walked from the root each);
    None when the path-based ``scan_model`` must decide (a link anywhere in it, an error: its words)."""
    name, link, escapes = entry
    if link or escapes:
        return None
    try:
        fd = open_folder_at(root_fd, name)
    except (OSError, ValueError):
        return None
    try:
        return _listed_at(fd, folder, root, read)
    finally:
        os.close(fd)


def _config_at(fd: int, entry: os.DirEntry[str], read: bool) -> tuple[bytes | None, os.stat_result]:
    """The config's bytes (None when not ``read`` or when the guarded read refuses it: the path-based
    reader then gives the words) and its stat; ``OSError`` when it cannot even be stat-ed."""
    if read:
        try:
            return read_entry_stat_at(fd, entry, CONFIG)
        except UnsafeFile:  # a special file, an error
            pass
    return None, entry.stat()


def _listed_at(fd: int, folder: Path, root: Path, read: bool) -> _Listed | None:
    """The model folder open as ``fd`` in one pass over its listing (``read``: its config read too); None
    when one of its entries is a link or on an error. A config read takes its record's size and mtime
    from the ``fstat`` of the read (the listed regular file itself) instead of a ``stat`` of its own."""
    files: list[FileEntry] = []
    folders: list[str] = []
    raw: bytes | None = None
    has_config = False
    plain = True  # no link anywhere (a link returns None) and every name ASCII: ModelEntry.plain_listing
    try:
        with os.scandir(fd) as it:
            children = sorted(it, key=_by_name)
        for c in children:
            if c.is_symlink():  # the listing's type: no syscall unless the file system gives none
                return None
            cname = c.name
            plain = plain and cname.isascii()
            if c.is_dir():
                files.append(FileEntry(cname, True))
                folders.append(cname)
                has_config = has_config or cname == CONFIG_FILE
                continue
            if cname == CONFIG_FILE:
                has_config = True
                raw, found = _config_at(fd, c, read)
            else:
                found = c.stat()  # size and mtime: RB405, the version rules and the ONNX memo use them
            files.append(FileEntry(cname, False, found.st_size, mtime_ns=found.st_mtime_ns))
    except OSError:
        return None
    versions = []
    for vname in folders:
        number, ignored = parse_version_name(vname)
        vpath = _child(folder, vname)
        at = _list_at(fd, vname)
        vproblem = None
        if at is None:
            vfiles, vproblem = _list(vpath, root)
            plain = False
        else:
            vfiles, ascii_names = at
            plain = plain and ascii_names
        versions.append(VersionDir(vname, vpath, number, ignored or vproblem, vfiles))
    return tuple(files), tuple(versions), has_config, raw, plain


def _finish(entry: _Folder, folder: Path, root: Path, config_path: Path, listed: _Listed | None, config: ConfigResult | None) -> ModelEntry:
    """The model of a listed folder (``config``: its config's verdict when read elsewhere, else read here);
    a folder not listed (None) is scanned the path-based way."""
    name, _, escapes = entry
    if listed is None:
        return scan_model(folder, root, config_result=config, escapes=escapes, config_path=config_path)
    files, versions, has_config, raw, plain = listed
    if not has_config:
        config = _NO_CONFIG
    elif config is None:
        config = config_from_bytes(raw) if raw is not None else read_config(config_path, root)
    parsed, text, problem, line, column = config
    return ModelEntry(
        name=name,
        path=folder,
        config_path=config_path,
        config=parsed,
        config_text=text,
        config_problem=problem,
        config_line=line,
        config_column=column,
        versions=versions,
        files=files,
        plain_listing=plain,
        path_text=child_text(root, name),
    )


# The configs are parsed a batch at a time, after the batch's folders are listed and read: protobuf's
# parser then runs back to back with its code and tables warm, not between a dozen syscalls per model (on
# 1,000 models the scan's cost beyond the parse fell by a third). A batch holds at most 64 folders and
# 1 MiB of config bytes, so memory stays bounded whatever the configs' sizes.
_BATCH_MODELS = 64
_BATCH_BYTES = 1 << 20


def _scan_in_batches(
    dirs: list[_Folder], folders: list[Path], config_paths: list[Path], root: Path, root_fd: int
) -> tuple[ModelEntry, ...]:
    models: list[ModelEntry] = []
    batch: list[tuple[_Folder, Path, Path, _Listed | None]] = []
    held = 0
    for e, folder, config_path in zip(dirs, folders, config_paths, strict=True):
        listed = _listed_model(e, folder, root, root_fd, True)
        batch.append((e, folder, config_path, listed))
        held += len(listed[3] or b"") if listed is not None else 0
        if len(batch) >= _BATCH_MODELS or held >= _BATCH_BYTES:
            models.extend([_finish(e, f, root, c, found, None) for e, f, c, found in batch])
            batch.clear()
            held = 0
    models.extend([_finish(e, f, root, c, found, None) for e, f, c, found in batch])
    return tuple(models)


def _scan_models(dirs: list[_Folder], root: Path, root_fd: int) -> tuple[ModelEntry, ...]:
    folders = [_child(root, name) for name, _, _ in dirs]
    config_paths = [_child(folder, CONFIG_FILE) for folder in folders]
    # Parsing the configs is most of the work: in a big repository a forked child parses the configs of
    # the last 55% of the folders while this process lists every folder and parses the rest (listing
    # is the extra 10%). The child tries each folder's config.pbtxt; only those the listing shows are
    # used, exactly as in a serial scan.
    split = len(folders) * 45 // 100
    child = None
    if len(folders) >= PARALLEL_MIN_CONFIGS and _can_fork():
        child = _ChildParse.start(config_paths[split:])
    if child is None:  # one process: each folder listed and its config read through its descriptor
        return _scan_in_batches(dirs, folders, config_paths, root, root_fd)
    try:
        listed = [_listed_model(e, folder, root, root_fd, i < split) for i, (e, folder) in enumerate(zip(dirs, folders, strict=True))]
        own = [
            _finish(e, folder, root, config_path, found, None)
            for e, folder, config_path, found in zip(dirs[:split], folders[:split], config_paths[:split], listed[:split], strict=True)
        ]
    except BaseException:
        child.abandon()
        raise
    second: Sequence[ConfigResult | None] | None = child.result()
    if second is None:  # the child failed: its share is read here
        second = [None] * (len(folders) - split)
    rest = [
        _finish(e, folder, root, config_path, found, config)
        for e, folder, config_path, found, config in zip(
            dirs[split:], folders[split:], config_paths[split:], listed[split:], second, strict=True
        )
    ]
    return (*own, *rest)


def scan_repository(location: str | Path) -> Repository:
    """Scan a local repository folder. Raises ``UserError`` if it is not a readable folder."""
    root = Path(location)
    if not root.exists():
        raise UserError(f"{root}: no such folder; pass the model repository's path")
    if not root.is_dir():
        raise UserError(f"{root}: not a folder; pass the model repository's path")
    root = root.resolve()
    dirs, files = _root_listing(root)
    try:
        root_fd = open_root(root)
    except OSError as exc:
        raise UserError(f"{root}: cannot open the folder: {exc.strerror or exc}") from None
    try:
        models = _scan_models(dirs, root, root_fd)
    finally:
        os.close(root_fd)
    return Repository(root=root, models=models, location=str(location), files=files)
