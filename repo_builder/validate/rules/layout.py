"""Rules RB1xx: the repository's folders as Triton's model repository manager reads them.

Every subfolder of the repository is a model, hidden ones too (core: ``model_repository_manager.cc``).
Version folders and the version policy are in versions.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from repo_builder.triton_layout import CONFIG_FILE
from repo_builder.validate.analysis.autocomplete import python_io_autocompleted
from repo_builder.validate.analysis.resolve import resolve_backend
from repo_builder.validate.analysis.versions import is_unlistable, listing_summary, misplaced_config_hint
from repo_builder.validate.records import FileEntry, Finding, ModelEntry, Rule, RuleContext, Severity, rule


def is_utf8(name: str) -> bool:
    """False for names that came off the disk with undecodable bytes (surrogate escapes)."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True




@rule("RB101", "hidden-model-folder", Severity.WARNING, quiet="plain_model")
def check_hidden_model_folder(model: ModelEntry, ctx: RuleContext) -> Iterator[Finding]:
    """A hidden folder (name starting with ``.``) in the repository is a model to Triton.

    Triton treats every subfolder of the repository as a model, hidden ones too: a hidden folder with a
    valid config and model file loads as a model named ``.name``, and it is judged here like any other
    model. Jupyter's ``.ipynb_checkpoints``, ``.git`` or an editor's cache folder make the server try
    (and fail) to load a model of that name, which the other rules report as errors (e.g. RB110, no
    version folder), and with ``--exit-on-error`` (the default) the server does not start.

    Fails (warning here; RB110 refuses the empty folder)::

        models/.ipynb_checkpoints/
        models/add_sub/config.pbtxt

    Passes::

        models/add_sub/config.pbtxt
    """
    if model.name.startswith("."):
        backend = model.name[1:] or model.name
        tail = "" if model.has_config_file else f" (without a config it looks for a backend named '{backend}')"
        yield Finding(
            f"'{model.name}' is a hidden folder, but Triton treats every subfolder of the repository as a "
            f"model and loads (or tries to load) it as model '{model.name}'{tail}",
            path=model.path,
            hint="if it is not a model, delete the folder or move it out of the model repository; "
            "if it is, give it a name without the leading '.'",
        )


@rule("RB102", "folder-unreadable", quiet="plain_model")
def check_folder_unreadable(model: ModelEntry, ctx: RuleContext) -> Iterator[Finding]:
    """A model folder or version folder that cannot be listed.

    Triton lists each model folder to find its versions and each version folder to find the model file;
    a folder it cannot read (permissions, a broken mount) fails the load.

    Fails: ``models/add_sub/`` with mode ``000`` for the user that runs Triton.

    Passes: ``models/add_sub/`` readable by that user.
    """
    if is_unlistable(model.problem):
        yield Finding(str(model.problem), path=model.path, hint="check the folder's permissions")
    for v in model.versions:
        if v.number is not None and v.ignored is not None:
            yield Finding(
                f"version folder '{v.name}': {v.ignored}",
                path=v.path,
                version=v.number,
                hint="check the folder's permissions",
            )



def _escaping(entries: tuple[FileEntry, ...], base: Path) -> Iterator[tuple[Path, FileEntry]]:
    for f in entries:
        if f.escapes or f.broken:
            yield base / f.name, f


def _link_finding(label: str, path: Path, entry: FileEntry, version: int | None) -> Finding:
    if entry.escapes:
        # Nothing of the target is printed: on an untrusted repository it may name a secret.
        return Finding(
            f"'{label}' is a symlink that leaves the repository; validate does not follow it",
            path=path,
            version=version,
            hint="copy the file into the repository instead of linking to it",
        )
    return Finding(
        f"'{label}' is a broken symlink",
        path=path,
        version=version,
        severity=Severity.WARNING,
        hint="remove the link or point it at a file inside the repository",
    )


@rule("RB103", "symlink-leaves-repository", quiet="plain_listing")
def check_symlink_leaves_repository(model: ModelEntry, ctx: RuleContext) -> Iterator[Finding]:
    """A symlink inside the repository that points outside it (an error), or nowhere (a warning).

    Triton follows symlinks on a local disk, so this loads on the machine that made the link, but the
    link breaks as soon as the repository is copied, packed into an image or uploaded to an object
    store. On an untrusted repository (a pull request) a link may point at a secret
    (``config.pbtxt -> /proc/self/environ``): validate never reads through such a link and prints
    nothing of its target. A link to a missing target inside the repository is a warning.

    Fails: ``models/resnet/1/model.onnx -> /home/me/exports/resnet.onnx``

    Passes: ``models/resnet/1/model.onnx`` as a regular file (or a link to a file inside the
    repository).
    """
    if model.problem is not None and not is_unlistable(model.problem):
        yield Finding(str(model.problem), path=model.path, hint="copy the folder into the repository")
        return
    if listing_summary(model).links_ok:
        return
    for path, entry in _escaping(model.files, model.path):
        yield _link_finding(path.name, path, entry, None)
    for v in model.versions:
        for path, entry in _escaping(v.files, v.path):
            yield _link_finding(f"{v.name}/{path.name}", path, entry, v.number)


@rule("RB104", "non-utf8-name", quiet="plain_listing")
def check_non_utf8_name(model: ModelEntry, ctx: RuleContext) -> Iterator[Finding]:
    """A folder or file name that is not valid UTF-8.

    Model names travel in protobuf strings, URLs and JSON, which must be UTF-8: a model folder whose name
    has other bytes cannot be named by a client and its config's ``name`` can never match the folder.
    Non-UTF-8 file names inside a model are a warning: they break copying to object stores.

    Fails: a model folder named ``caf\\xe9`` (Latin-1 bytes).

    Passes: ``café`` written as UTF-8.
    """
    if not is_utf8(model.name):
        yield Finding(
            "model folder name is not valid UTF-8; Triton model names must be UTF-8 text",
            path=model.path,
            hint="rename the folder with ASCII or UTF-8 characters",
        )
    if listing_summary(model).utf8:  # one check for the common case
        return
    names: list[tuple[str, Path, int | None]] = [(f.name, model.path, None) for f in model.files]
    for v in model.versions:
        names.extend((f.name, v.path, v.number) for f in v.files)
    for name, folder, version in names:
        path = folder / name
        if not is_utf8(name):
            yield Finding(
                "file or folder name is not valid UTF-8",
                path=path,
                version=version,
                severity=Severity.WARNING,
                hint="rename it with ASCII or UTF-8 characters; object stores and Triton's clients need UTF-8",
            )


@rule("RB105", "config-missing", quiet="plain_model")
def check_config_missing(model: ModelEntry, ctx: RuleContext) -> Iterator[Finding]:
    """A model folder without ``config.pbtxt``.

    With auto-complete on (Triton's default) a config may be left out when the backend can build it from
    the model file (ONNX Runtime, TensorRT, Python's ``auto_complete_config``): this is reported as
    information, and the backend is detected from the file names as Triton does (RB401 reports when it
    cannot be). Under ``--strict`` (Triton's ``--disable-auto-complete-config``) the config is required.
    A ``config.pbtxt`` inside a version folder is never read: that is a warning (an error under
    ``--strict``) saying where the file belongs.

    Fails (``--strict``)::

        models/densenet/1/model.onnx

    Passes::

        models/densenet/config.pbtxt
        models/densenet/1/model.onnx
    """
    if model.has_config_file or is_unlistable(model.problem):
        return
    where = f"{model.name}/{CONFIG_FILE}"
    misplaced = misplaced_config_hint(model)
    if ctx.options.strict:
        yield Finding(
            f"failed to open text file for read {where}: No such file or directory",
            path=model.path,
            hint=misplaced or f"write {where} (auto-complete is off under --strict)",
        )
        return
    if misplaced:
        yield Finding(
            f"no {CONFIG_FILE} in the model folder; the one in a version folder is never read by Triton",
            path=model.path,
            severity=Severity.WARNING,
            hint=misplaced,
        )
        return
    resolved = resolve_backend(model)
    if resolved.backend or resolved.platform:
        source = f" from {resolved.detected_from}" if resolved.detected_from else ""
        yield Finding(
            f"no {CONFIG_FILE}: Triton auto-completes the configuration{source} "
            f"(backend '{resolved.backend or resolved.platform}')",
            path=model.path,
            severity=Severity.INFO,
            hint=_config_missing_hint(model, resolved.backend),
        )


def _config_missing_hint(model: ModelEntry, backend: str | None) -> str:
    """What auto-complete can know: a Python model.py without ``auto_complete_config`` adds nothing."""
    if backend == "python" and not python_io_autocompleted(model):
        return (
            "model.py has no auto_complete_config, so the model has no inputs or outputs and max_batch_size 0; "
            f"write {model.name}/{CONFIG_FILE} to declare them"
        )
    return "checks of inputs, outputs and batching need the model file; write a config to pin them"


@rule("RB106", "model-name-mismatch", field="name", quiet="plain_model")
def check_model_name_mismatch(model: ModelEntry, ctx: RuleContext) -> Iterator[Finding]:
    """The config's ``name`` differs from the model folder's name.

    Triton requires them to be equal (an empty ``name`` is filled in from the folder).

    Fails: ``models/resnet/config.pbtxt`` with ``name: "resnet50"``.

    Passes: ``name: "resnet"``, or no ``name`` at all.
    """
    config = model.config
    if config is not None and config.name and config.name != model.name:
        yield Finding(
            f"unexpected directory name '{model.name}' for model '{config.name}', "
            "directory name must equal model name",
            hint=f"rename the folder to '{config.name}' or set name: \"{model.name}\"",
        )


RULES: tuple[Rule, ...] = (
    check_hidden_model_folder,
    check_folder_unreadable,
    check_symlink_leaves_repository,
    check_non_utf8_name,
    check_config_missing,
    check_model_name_mismatch,
)
