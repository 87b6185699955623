"""Rules RB1xx: the repository's folders as Triton's model repository manager reads them.

Every subfolder of the repository is a model, numeric subfolders of a model are its versions, and the
version policy picks which of them load (core: ``model_repository_manager.cc``, ``model_lifecycle.cc``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from repo_builder.validate.records import (
    FileEntry,
    Finding,
    ModelEntry,
    Rule,
    RuleContext,
    Severity,
    VersionDir,
    rule,
)
from repo_builder.validate.scan import CONFIG_FILE, RESERVED_DIRS


def versions_to_load(model: ModelEntry) -> tuple[int, ...]:
    """The versions Triton loads under the model's version policy (default: the latest one).

    Mirrors core's ``VersionsToLoad``: a ``specific`` version without its folder is skipped, ``latest``
    takes the ``num_versions`` greatest, a policy with no choice set means all. Many rules ask, so the
    answer is kept on the model entry.
    """
    facts = model.facts
    loaded = facts.get(_versions_to_load)
    if loaded is None:
        loaded = facts[_versions_to_load] = _versions_to_load(model)
    return loaded


def _versions_to_load(model: ModelEntry) -> tuple[int, ...]:
    existing = sorted(set(model.version_numbers), reverse=True)
    config = model.config
    if config is None or not config.HasField("version_policy"):
        return tuple(existing[:1])
    policy = config.version_policy
    choice = policy.WhichOneof("policy_choice")
    if choice == "specific":
        present = set(existing)
        return tuple(sorted({v for v in policy.specific.versions if v in present}))
    if choice == "latest":
        return tuple(sorted(existing[: max(policy.latest.num_versions, 0)]))
    return tuple(sorted(existing))


def version_folder(model: ModelEntry, number: int) -> VersionDir | None:
    """The folder backends read version ``number`` from: always ``str(number)``, whatever Triton parsed."""
    for v in model.versions:
        if v.name == str(number):
            return v
    return None


def is_utf8(name: str) -> bool:
    """False for names that came off the disk with undecodable bytes (surrogate escapes)."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _is_unlistable(problem: str | None) -> bool:
    return problem is not None and problem.startswith("cannot list")


@rule("RB101", "hidden-model-folder", Severity.WARNING)
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


@rule("RB102", "folder-unreadable")
def check_folder_unreadable(model: ModelEntry, ctx: RuleContext) -> Iterator[Finding]:
    """A model folder or version folder that cannot be listed.

    Triton lists each model folder to find its versions and each version folder to find the model file;
    a folder it cannot read (permissions, a broken mount) fails the load.

    Fails: ``models/add_sub/`` with mode ``000`` for the user that runs Triton.

    Passes: ``models/add_sub/`` readable by that user.
    """
    if _is_unlistable(model.problem):
        yield Finding(str(model.problem), path=model.path, hint="check the folder's permissions")
    for v in model.versions:
        if v.number is not None and v.ignored is not None:
            yield Finding(
                f"version folder '{v.name}': {v.ignored}",
                path=v.path,
                version=v.number,
                hint="check the folder's permissions",
            )


def _escaping(entries: tuple[FileEntry, ...], base: Path) -> Iterator[Path]:
    for f in entries:
        if f.escapes:
            yield base / f.name


@rule("RB103", "symlink-leaves-repository", Severity.WARNING)
def check_symlink_leaves_repository(model: ModelEntry, ctx: RuleContext) -> Iterator[Finding]:
    """A symlink inside the repository that points outside it (or nowhere).

    Triton follows symlinks on a local disk, so this loads on the machine that made the link, but the
    link breaks as soon as the repository is copied, packed into an image or uploaded to an object
    store: the model then fails to load elsewhere.

    Fails: ``models/resnet/1/model.onnx -> /home/me/exports/resnet.onnx``

    Passes: ``models/resnet/1/model.onnx`` as a regular file (or a link to a file inside the
    repository).
    """
    if model.problem is not None and not _is_unlistable(model.problem):
        yield Finding(str(model.problem), path=model.path, hint="copy the folder into the repository")
    hint = "copy the file into the repository instead of linking to it"
    for path in _escaping(model.files, model.path):
        yield Finding(
            f"'{path.name}' is a symlink that leaves the repository or is broken", path=path, hint=hint
        )
    for v in model.versions:
        for path in _escaping(v.files, v.path):
            yield Finding(
                f"'{v.name}/{path.name}' is a symlink that leaves the repository or is broken",
                path=path,
                version=v.number,
                hint=hint,
            )


@rule("RB104", "non-utf8-name")
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
    names = [(f.name, model.path, None) for f in model.files]
    for v in model.versions:
        names.extend((f.name, v.path, v.number) for f in v.files)
    if is_utf8("".join(n for n, _, _ in names)):  # one check for the common case
        return
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


@rule("RB105", "config-missing")
def check_config_missing(model: ModelEntry, ctx: RuleContext) -> Iterator[Finding]:
    """A model folder without ``config.pbtxt``.

    With auto-complete on (Triton's default) a config may be left out when the backend can build it from
    the model file (ONNX Runtime, TensorRT, Python's ``auto_complete_config``): this is reported as
    information, and the backend is detected from the file names as Triton does (RB401 reports when it
    cannot be). Under ``--strict`` (Triton's ``--disable-auto-complete-config``) the config is required.

    Fails (``--strict``)::

        models/densenet/1/model.onnx

    Passes::

        models/densenet/config.pbtxt
        models/densenet/1/model.onnx
    """
    if model.has_config_file or _is_unlistable(model.problem):
        return
    where = f"{model.name}/{CONFIG_FILE}"
    if ctx.options.strict:
        yield Finding(
            f"failed to open text file for read {where}: No such file or directory",
            path=model.path,
            hint=f"write {where} (auto-complete is off under --strict)",
        )
        return
    from repo_builder.validate.rules.platform import resolve_backend

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
    from repo_builder.validate.rules.config import python_io_autocompleted  # config.py imports this module

    if backend == "python" and not python_io_autocompleted(model):
        return (
            "model.py has no auto_complete_config, so the model has no inputs or outputs and max_batch_size 0; "
            f"write {model.name}/{CONFIG_FILE} to declare them"
        )
    return "checks of inputs, outputs and batching need the model file; write a config to pin them"


@rule("RB106", "model-name-mismatch")
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


@rule("RB107", "version-folder-ignored", Severity.WARNING)
def check_version_folder_ignored(model: ModelEntry, ctx: RuleContext) -> Iterator[Finding]:
    """A subfolder of a model that Triton silently skips as a version.

    Names with a leading zero (``01``, ``007``) and names that are not numbers (``v1``, ``latest``) are
    ignored with only a log warning, so the model loads without that version, or fails when no version
    is left (RB110). ``warmup``, ``initial_state`` and ``configs`` are Triton's own folders and are
    fine. The message is Triton's own log line.

    Fails: ``models/add_sub/01/model.py``

    Passes: ``models/add_sub/1/model.py``
    """
    for v in model.versions:
        if v.number is None and v.name not in RESERVED_DIRS and v.ignored:
            suggestion = v.name.lstrip("0") or "0"
            hint = (
                f"rename it to '{suggestion}'"
                if suggestion.isdigit()
                else "version folders are named by a number (1, 2, ...)"
            )
            yield Finding(v.ignored, path=v.path, hint=hint)


@rule("RB108", "version-folder-not-canonical")
def check_version_folder_not_canonical(model: ModelEntry, ctx: RuleContext) -> Iterator[Finding]:
    """A version folder Triton reads as a number but whose name is not that number's plain spelling.

    Triton converts folder names with C's ``stoll``, which accepts ``+1``, `` 1`` and ``1a`` as
    version 1, but backends then look for the model file in the folder ``1/``, which does not exist,
    so the load fails with a missing file. An ensemble has no files, so there it is only a warning.

    Fails: ``models/add_sub/1a/model.py``

    Passes: ``models/add_sub/1/model.py``
    """
    names = {v.name for v in model.versions}
    for v in model.versions:
        if v.number is None or v.name == str(v.number):
            continue
        duplicate = str(v.number) in names
        severity = Severity.WARNING if duplicate or model.is_ensemble else None
        tail = (
            f"folder '{v.number}' also exists and is the one backends read"
            if duplicate
            else f"backends read the files of version {v.number} from the folder '{v.number}', which does not exist"
        )
        yield Finding(
            f"version folder '{v.name}' is version {v.number} to Triton, but {tail}",
            path=v.path,
            version=v.number,
            severity=severity,
            hint=f"rename it to '{v.number}'",
        )


@rule("RB109", "specific-version-missing")
def check_specific_version_missing(model: ModelEntry, ctx: RuleContext) -> Iterator[Finding]:
    """A ``version_policy: { specific: { versions: [...] } }`` names a version with no folder.

    Triton logs an error and loads the others; a client asking for the missing version gets an error.

    Fails: ``specific { versions: [1, 2] }`` with only ``1/``.

    Passes: ``specific { versions: [1] }`` with ``1/``.
    """
    config = model.config
    if config is None or config.version_policy.WhichOneof("policy_choice") != "specific":
        return
    present = set(model.version_numbers)
    for v in config.version_policy.specific.versions:
        if v not in present:
            yield Finding(
                f"version {v} is specified for model '{model.name}', but the version directory is not present",
                version=v,
                hint=f"create the folder '{v}' or remove {v} from version_policy",
            )


@rule("RB110", "no-version-available")
def check_no_version_available(model: ModelEntry, ctx: RuleContext) -> Iterator[Finding]:
    """No version folder is left to load under the model's version policy.

    The classic cause is an ensemble without a ``1/`` folder (ensembles have no model file, but still
    need an empty version folder), or a version folder named ``01``. Object stores (S3, GCS) drop empty
    folders: put a placeholder file (e.g. ``1/.keep``) in an ensemble's version folder before uploading.

    Fails::

        models/pipeline/config.pbtxt      # platform: "ensemble", no 1/

    Passes::

        models/pipeline/config.pbtxt
        models/pipeline/1/.keep
    """
    if _is_unlistable(model.problem):
        return
    if versions_to_load(model):
        return
    ignored = [v.name for v in model.versions if v.number is None and v.name not in RESERVED_DIRS]
    if ignored:
        hint = (
            "Triton ignores the folder(s) "
            + ", ".join(f"'{n}'" for n in ignored)
            + "; name a version folder 1"
        )
    elif model.version_numbers:
        hint = "the version_policy selects none of the existing versions"
    elif model.is_ensemble:
        hint = "create an empty folder '1' (with a placeholder file such as 1/.keep if it goes to an object store)"
    else:
        hint = "put the model file in a version folder, e.g. 1/"
    yield Finding(
        f"at least one version must be available under the version policy of model '{model.name}'",
        path=model.path,
        hint=hint,
    )


RULES: tuple[Rule, ...] = (
    check_hidden_model_folder,
    check_folder_unreadable,
    check_symlink_leaves_repository,
    check_non_utf8_name,
    check_config_missing,
    check_model_name_mismatch,
    check_version_folder_ignored,
    check_version_folder_not_canonical,
    check_specific_version_missing,
    check_no_version_available,
)
