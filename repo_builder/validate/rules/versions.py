"""Rules RB1xx (continued): version folders and the version policy (core ``model_lifecycle.cc``).

Numeric subfolders of a model are its versions, and the version policy picks which of them load.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import chain

from repo_builder.onnx_io import OnnxSignature
from repo_builder.triton_layout import SKIPPED_VERSION_FOLDERS
from repo_builder.validate.analysis.bounded import name_list
from repo_builder.validate.analysis.manifest import LABELS_FILE, built_role, labels_count, manifest
from repo_builder.validate.analysis.onnx_compare import compare_onnx
from repo_builder.validate.analysis.onnx_model import onnx_file, onnx_filename, read_version_signature
from repo_builder.validate.analysis.versions import is_unlistable, versions_to_load
from repo_builder.validate.records import Finding, ModelEntry, Rule, RuleContext, Severity, rule

# Triton converts a version folder's name to int64 (std::stoll): a longer number fails to convert.
_MAX_VERSION = 2**63 - 1


def _rename_hint(name: str) -> str:
    """What to rename an ignored version folder to: its number without leading zeros, when that is a
    version Triton can read and another name than its own (``99999999999999999999`` is neither)."""
    suggestion = name.lstrip("0") or "0"
    if suggestion.isascii() and suggestion.isdigit() and suggestion != name and int(suggestion) <= _MAX_VERSION:
        return f"rename it to '{suggestion}'"
    if suggestion.isascii() and suggestion.isdigit():
        return f"version numbers must fit in a signed 64-bit integer (at most {_MAX_VERSION}); rename it to 1, 2, ..."
    return "version folders are named by a number (1, 2, ...)"


@rule("RB107", "version-folder-ignored", Severity.WARNING, quiet="plain_model")
def check_version_folder_ignored(model: ModelEntry, ctx: RuleContext) -> Iterator[Finding]:
    """A subfolder of a model that Triton silently skips as a version.

    Names with a leading zero (``01``, ``007``) and names that are not numbers (``v1``, ``latest``) are
    ignored with only a log warning, so the model loads without that version, or fails when no version
    is left (RB110). ``warmup``, ``initial_state`` and ``configs`` are Triton's own folders and are
    fine. A name with no digit at all (``tokenizer``, ``assets``) is not a mistyped version but files
    kept beside the versions, which Triton loads fine: that is only an ``info``. The message is Triton's
    own log line.

    Fails: ``models/add_sub/01/model.py`` (a warning; ``models/add_sub/tokenizer/`` is an info)

    Passes: ``models/add_sub/1/model.py``
    """
    for v in model.versions:
        if v.number is None and v.name not in SKIPPED_VERSION_FOLDERS and v.ignored:
            hint = _rename_hint(v.name)
            # No digit: a folder of assets beside the versions, not a version that was meant to load.
            severity = None if any(c.isdigit() for c in v.name) else Severity.INFO
            yield Finding(v.ignored, path=v.path, hint=hint, severity=severity)


@rule("RB108", "version-folder-not-canonical", quiet="plain_model")
def check_version_folder_not_canonical(model: ModelEntry, ctx: RuleContext) -> list[Finding]:
    """A version folder Triton reads as a number but whose name is not that number's plain spelling.

    Triton converts folder names with C's ``stoll``, which accepts ``+1``, `` 1`` and ``1a`` as
    version 1, but backends then look for the model file in the folder ``1/``, which does not exist,
    so the load fails with a missing file. An ensemble has no files, so there it is only a warning.

    Fails: ``models/add_sub/1a/model.py``

    Passes: ``models/add_sub/1/model.py``
    """
    found: list[Finding] = []  # a list, not a generator: most models find nothing
    names: set[str] | None = None  # made for the first finding only
    for v in model.versions:
        if v.number is None or v.name == str(v.number):
            continue
        if names is None:
            names = {v.name for v in model.versions}
        duplicate = str(v.number) in names
        severity = Severity.WARNING if duplicate or model.is_ensemble else None
        tail = (
            f"folder '{v.number}' also exists and is the one backends read"
            if duplicate
            else f"backends read the files of version {v.number} from the folder '{v.number}', which does not exist"
        )
        found.append(
            Finding(
                f"version folder '{v.name}' is version {v.number} to Triton, but {tail}",
                path=v.path,
                version=v.number,
                severity=severity,
                hint=f"rename it to '{v.number}'",
            )
        )
    return found


@rule("RB109", "specific-version-missing", field="version_policy", sections=("version_policy",))
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


@rule("RB110", "no-version-available", quiet="versions_loaded")
def check_no_version_available(model: ModelEntry, ctx: RuleContext) -> tuple[Finding, ...]:
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
    if is_unlistable(model.problem) or versions_to_load(model):
        return ()  # a tuple, not a generator: nearly every model has a version
    ignored = [v.name for v in model.versions if v.number is None and v.name not in SKIPPED_VERSION_FOLDERS]
    if ignored:
        hint = (
            "Triton ignores the folder(s) "
            + name_list(f"'{n}'" for n in ignored)
            + "; name a version folder 1"
        )
    elif model.version_numbers:
        hint = "the version_policy selects none of the existing versions"
    elif model.is_ensemble:
        hint = "create an empty folder '1' (with a placeholder file such as 1/.keep if it goes to an object store)"
    else:
        hint = "put the model file in a version folder, e.g. 1/"
    return (
        Finding(
            f"at least one version must be available under the version policy of model '{model.name}'",
            path=model.path,
            hint=hint,
        ),
    )


@rule("RB111", "versions-disagree", Severity.WARNING, quiet="versions_settled")
def check_versions_disagree(model: ModelEntry, ctx: RuleContext) -> Iterable[Finding]:
    """A version folder whose files disagree with the ``config.pbtxt`` that every version shares.

    All versions of a model share one config. A version the policy does not load today (an older
    ``1/`` beside ``2/``) is still loaded by a policy change or a rollback, and then refused: its ONNX
    graph's inputs and outputs must fit the config too (loaded versions are judged by RB6xx). In a
    repository repo-builder built (``repo-builder.json``), a postprocess step's ``labels.txt`` must hold
    as many labels as the shared config's logits have classes, in every version: otherwise a version
    answers with labels that do not match its scores.

    Fails: ``1/model.onnx`` with 5 output classes and ``2/model.onnx`` with 10, under a config that
    says 10; or ``1/labels.txt`` with 5 labels under a postprocess config whose ``LOGITS`` has 10.

    Passes: every version's files fit the config.
    """
    # Generators only when there is something to compare: an ONNX version not loaded now, a manifest.
    filename = onnx_filename(model, ctx)
    onnx = filename is not None and model.config is not None and model.version_numbers != versions_to_load(model)
    data = manifest(ctx)
    if not onnx and not isinstance(data, dict):
        return ()
    return chain(
        _onnx_disagreements(model, ctx, filename) if onnx and filename is not None else (),
        _labels_disagreements(model, data),
    )


def _onnx_disagreements(model: ModelEntry, ctx: RuleContext, filename: str) -> Iterator[Finding]:
    if model.config is None:
        return
    loaded = set(versions_to_load(model))
    for number in model.version_numbers:
        path = onnx_file(model, number, filename) if number not in loaded else None
        sig = read_version_signature(path, model, filename) if path is not None else None
        if not isinstance(sig, OnnxSignature):
            continue
        problems = [p for p in compare_onnx(model.name, model.config, sig, ctx.options.strict) if p.severity is None and p.code != "RB607"]
        if problems:
            yield Finding(
                f"version {number} is not loaded now, but its {filename} disagrees with the config all versions "
                f"share: {problems[0].message}",
                path=path,
                version=number,
                hint="rebuild the old version for this config, or delete its folder",
            )


def _labels_disagreements(model: ModelEntry, data: object) -> Iterator[Finding]:
    cfg = model.config
    if not isinstance(data, dict) or cfg is None or built_role(data, model.name) != "postprocess" or not cfg.input:
        return
    dims = list(cfg.input[0].dims)
    classes = dims[-1] if dims else 0
    if classes <= 0:
        return
    for v in model.versions:
        count = labels_count(v.path / LABELS_FILE, model.path) if v.number is not None and v.has(LABELS_FILE) else None
        if count is not None and count != classes:
            yield Finding(
                f"version {v.name} has {count} labels in {LABELS_FILE}, but the config all versions share gives "
                f"'{cfg.input[0].name}' {classes} classes",
                path=v.path / LABELS_FILE,
                version=v.number,
                hint="rebuild this version with the current labels, or write it as a new version with its own config",
            )


RULES: tuple[Rule, ...] = (
    check_version_folder_ignored,
    check_version_folder_not_canonical,
    check_specific_version_missing,
    check_no_version_available,
    check_versions_disagree,
)
