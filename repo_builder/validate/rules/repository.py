"""Rules RB0xx: the repository as a whole (what was passed as a repository), and repo-builder's manifest."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from repo_builder.compile_recipe import RECIPE_FILE
from repo_builder.triton_layout import CONFIG_FILE
from repo_builder.validate.analysis.backends import BACKENDS, TENSORFLOW_GRAPHDEF, TORCH_AOTI_INFO
from repo_builder.validate.analysis.manifest import MANIFEST_FILE, built_files, check_built_file, manifest
from repo_builder.validate.records import (
    Finding,
    ModelEntry,
    Rule,
    RuleContext,
    Severity,
    repository_rule,
    rule,
)
from repo_builder.validate.scan import parse_version_name

MODEL_FILES = frozenset(
    name for info in (*BACKENDS.values(), TENSORFLOW_GRAPHDEF, TORCH_AOTI_INFO) for name in info.model_files
)
EXPORT_FILES = frozenset({"signature.json", "model.onnx"})


def _looks_like_model_folder(ctx: RuleContext) -> bool:
    """A config.pbtxt at the root, or only numbered subfolders holding model files."""
    repo = ctx.repository
    if any(f.name == CONFIG_FILE for f in repo.files):
        return True
    numbered = [m for m in repo.models if parse_version_name(m.name)[0] is not None]
    return bool(repo.models) and len(numbered) == len(repo.models) and any(
        f.name in MODEL_FILES or f.name == CONFIG_FILE for m in numbered for f in m.files
    )


@repository_rule("RB001", "not-a-model-repository")
def check_not_a_model_repository(ctx: RuleContext) -> Iterable[Finding]:
    """The folder given as the repository holds no model, or is a model folder or an export folder.

    Triton loads every subfolder of the repository as a model. A folder with no subfolder loads nothing
    (the server starts with no model), and a single model folder passed as the repository makes Triton
    treat its version folders (``1/``) as models, which all fail. Validate used to say "OK: 0 model(s)"
    here; it is an error, with a hint saying what to pass instead.

    Fails: ``repo-builder validate models/add_sub`` (``config.pbtxt`` and ``1/`` inside), an empty
    folder, or an export folder (``model.onnx`` and ``signature.json``).

    Passes: ``repo-builder validate models`` (the folder holding ``add_sub/``).
    """
    repo = ctx.repository
    names = {f.name for f in repo.files}
    if _looks_like_model_folder(ctx):
        yield Finding(
            "this is a model folder, not a model repository: Triton would load its subfolders as models",
            hint=f"pass its parent folder (the repository holding '{repo.root.name}/')",
        )
    elif not repo.models and EXPORT_FILES & names:
        yield Finding(
            "this is an export folder (model.onnx, signature.json), not a model repository",
            hint="build a repository from it with 'repo-builder build', then validate that repository",
        )
    elif not repo.models:
        yield Finding(
            "the repository holds no model folder: Triton would start with no model to serve",
            hint="pass the folder that holds one subfolder per model (e.g. models/ with models/add_sub/config.pbtxt)",
        )


def _compiled(model: ModelEntry, version: str) -> bool:
    folder = next((v for v in model.versions if v.name == version), None)
    return folder is not None and not folder.has(RECIPE_FILE)


def _manifest_finding(model: ModelEntry, version: str, relative: str, why: str) -> Finding:
    shown = f"{model.name}/{version}/{relative}"
    if why == "missing":
        return Finding(
            f"'{shown}' is missing: {MANIFEST_FILE} records it as built",
            path=model.path / version / relative,
            hint="rebuild the model with repo-builder build, or restore the file",
        )
    if why == "outside":
        return Finding(f"{MANIFEST_FILE} names '{shown}', a path outside the model folder", severity=Severity.ERROR)
    return Finding(
        f"'{shown}' changed since repo-builder built it (its sha256 differs from {MANIFEST_FILE})",
        path=model.path / version / relative,
        severity=Severity.WARNING,
        hint="rebuild the model, or rebuild the manifest if the change is intended",
    )


@rule("RB002", "built-file-changed")
def check_built_file_changed(model: ModelEntry, ctx: RuleContext) -> Iterator[Finding]:
    """A file repo-builder built is missing or changed (repositories with a ``repo-builder.json``).

    ``repo-builder build`` records every file it writes, with its sha256, in ``repo-builder.json`` at the
    repository root (Triton ignores root files). A recorded file that is missing fails the load; one
    whose content changed (a copy that went wrong, a hand edit) serves something nobody tested. Files
    are read only inside the model folder, never more than one file at a time. A version built with
    ``--defer-compile`` and compiled since (its ``compile.json`` replaced by a plan) is not compared.

    Fails: ``rm models/resnet50/1/model.onnx`` after a build.

    Passes: the repository exactly as repo-builder wrote it.
    """
    data = manifest(ctx)
    if not isinstance(data, dict) or model.problem is not None:
        return
    recorded = list(built_files(data, model.name))
    # compile-pending replaces a deferred build's ONNX and recipe with a plan the manifest does not list.
    compiled = {b.version for b in recorded if b.relative == RECIPE_FILE and _compiled(model, b.version)}
    for built in recorded:
        if built.version in compiled:
            continue
        why = check_built_file(model, built)
        if why is not None:
            yield _manifest_finding(model, built.version, built.relative, why)


@repository_rule("RB005", "manifest-unreadable", Severity.WARNING)
def check_manifest_readable(ctx: RuleContext) -> Iterable[Finding]:
    """``repo-builder.json`` is present but not read, so no built file is checked against it.

    The manifest is read like any repository file: only a regular file inside the repository, at most
    16 MiB, JSON nested at most 64 deep. A symlink (out of the repository, a loop), a FIFO, a device,
    a bigger file or JSON that is malformed or nested deeper is reported here and never parsed further:
    RB002 then checks nothing, and says so rather than passing.

    Fails: ``repo-builder.json -> /etc/passwd``; ``[[[[...]]]]`` nested 100,000 deep.

    Passes: the ``repo-builder.json`` that ``repo-builder build`` wrote.
    """
    data = manifest(ctx)
    if isinstance(data, str):
        yield Finding(
            f"{data}; built files are not checked against it",
            path=ctx.repository.root / MANIFEST_FILE,
            hint="let repo-builder build rewrite it, or delete it if the repository is no longer built by repo-builder",
        )


RULES: tuple[Rule, ...] = (check_not_a_model_repository, check_built_file_changed, check_manifest_readable)
