"""The offline validator as a build's judge: which errors a repository folder has, with the options a
build's runtime implies. The writer calls it on the state after each move it rehearses."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from repo_builder.validate.engine import validate_repository
from repo_builder.validate.records import Severity, ValidateOptions
from repo_builder.validate.reporters.formatting import format_diagnostic
from repo_builder.validate.rules.repository import INTEGRITY_CODES

Judge = Callable[[Path], tuple[str, ...]]


def repository_judge(options: ValidateOptions) -> Judge:
    """The error lines (``format_diagnostic``'s form) of the repository in a folder; empty when it passes.

    ``options``: those of the check after the build (the build pipeline passes
    ``pipelines/build_check.choose_check(...).options``), so the rehearsal and the final check judge for
    the same target.
    """

    def judge(folder: Path) -> tuple[str, ...]:
        report = validate_repository(folder, options)
        # Integrity findings (RB002) compare files with the manifest, which this build rewrites only after
        # the moves: a replaced version's new files always differ from the old record while rehearsing.
        return tuple(format_diagnostic(d) for d in report.diagnostics
                     if d.severity is Severity.ERROR and d.code not in INTEGRITY_CODES)

    return judge
