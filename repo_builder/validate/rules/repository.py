"""Rules RB0xx: the repository as a whole (what was passed as a repository), and repo-builder's manifest."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from repo_builder.compile_recipe import RECIPE_FILE
from repo_builder.store.urls import names_url
from repo_builder.triton_layout import CONFIG_FILE
from repo_builder.validate.analysis.backends import BACKENDS, TENSORFLOW_GRAPHDEF, TORCH_AOTI_INFO
from repo_builder.validate.analysis.manifest import (
    MANIFEST_FILE,
    built_files,
    check_built_file,
    manifest,
    needed_to_serve,
)
from repo_builder.validate.analysis.resolve import resolve_backend
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
    # Every model folder numbered (stops at the first that is not: a real repository's first name), and one
    # of them holding a model file or a config.
    return (
        bool(repo.models)
        and all(parse_version_name(m.name)[0] is not None for m in repo.models)
        and any(f.name in MODEL_FILES or f.name == CONFIG_FILE for m in repo.models for f in m.files)
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


INTEGRITY_CODES = frozenset({"RB002"})  # changed since build: fails the gate, but Triton does not refuse for it


def _manifest_finding(model: ModelEntry, version: str, relative: str, why: str, ctx: RuleContext) -> Finding:
    shown = f"{model.name}/{version}/{relative}"
    if why == "outside":
        return Finding(f"{MANIFEST_FILE} names '{shown}', a path outside the model folder", severity=Severity.ERROR)
    what = f"missing ({MANIFEST_FILE} records it)" if why == "missing" else f"its sha256 differs from {MANIFEST_FILE}"
    fix = "rebuild the model with repo-builder build, or restore the file" if why == "missing" else (
        "rebuild the model, or restore the file (a rebuild records an intended change)"
    )
    if needed_to_serve(model, relative, resolve_backend(model).backend):
        return Finding(
            f"'{shown}' changed since build: {what}; Triton or the step reads it to load and answer",
            path=model.path / version / relative,
            severity=Severity.ERROR,
            hint=fix,
        )
    return Finding(
        f"'{shown}' changed since build: {what}; nothing reads it to load or answer",
        path=model.path / version / relative,
        severity=Severity.ERROR if ctx.options.strict_manifest else Severity.WARNING,
        hint=fix + ("" if ctx.options.strict_manifest else "; --strict-manifest makes this an error"),
    )


@rule("RB002", "built-file-changed", quiet="no_manifest")
def check_built_file_changed(model: ModelEntry, ctx: RuleContext) -> Iterable[Finding]:
    """A file repo-builder built is missing or changed since the build (repositories with a
    ``repo-builder.json``): reported as "changed since build".

    ``repo-builder build`` records every file it writes, with its sha256, in ``repo-builder.json`` at the
    repository root (Triton ignores root files). This is an integrity finding, not a loading rule: Triton
    does not refuse a model for it, so the model's verdict stays its own (and ``--live`` agrees), but the
    gate fails when the file is one Triton or the step reads to load and answer: the model file,
    ``model.py`` and what a Python step reads beside it (tokenizer, labels, settings, shipped packages),
    an ONNX model's external data. The step would serve something nobody tested, or fail. Any other
    recorded file (a ``README.md``, anything in an ensemble's version folder, repo-builder's own
    ``signature.json``, ``plan.json``, ``compile.json``) is a warning; ``--strict-manifest`` makes every
    such file an error. Files are read only inside the model folder, never more than one file at a time.
    A version built with ``--defer-compile`` and compiled since (its ``compile.json`` replaced by a plan)
    is not compared.

    Fails: ``rm models/resnet50/1/model.onnx`` or an edit of ``preprocess/1/model.py`` after a build.

    Warns: ``rm models/pipeline/1/README.md`` (the ensemble's version folder).

    Passes: the repository exactly as repo-builder wrote it.
    """
    data = manifest(ctx)
    if not isinstance(data, dict) or model.problem is not None:
        return ()  # no generator for a repository without a manifest
    return _built_file_findings(model, ctx, data)


def _built_file_findings(model: ModelEntry, ctx: RuleContext, data: dict[str, Any]) -> Iterator[Finding]:
    recorded = list(built_files(data, model.name))
    # compile-pending replaces a deferred build's ONNX and recipe with a plan the manifest does not list.
    compiled = {b.version for b in recorded if b.relative == RECIPE_FILE and _compiled(model, b.version)}
    for built in recorded:
        if built.version in compiled:
            continue
        why = check_built_file(model, built, remote=names_url(ctx.repository.location))
        if why is not None:
            yield _manifest_finding(model, built.version, built.relative, why, ctx)


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
