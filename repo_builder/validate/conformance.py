"""Run Triton's own model-configuration test cases (qa/L0_model_config) through our validator.

A pure library for ``tests/validate/test_conformance.py`` and ``scripts/conformance-report``: load the
cases from the suite's index, lay each one out as Triton's ``test.sh`` does (a version folder ``1/``,
the model files the case carries, the ``platform:`` line swapped for the three platforms of
``noautofill_platform``), validate it with the options the server ran with, and compare: was the case's
model refused (an error on it), and does one of our messages carry Triton's expected text (a basic
regular expression from the case's ``expected*`` files)?
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from repo_builder.validate.engine import validate_repository
from repo_builder.validate.records import Diagnostic, Severity, ValidateOptions

ENV_VAR = "REPO_BUILDER_CONFORMANCE"
SUITE = "triton-qa"
INDEX = "L0_model_config_INDEX.json"
CASES_DIR = "L0_model_config"
NOAUTOFILL = "noautofill_platform"
NOAUTOFILL_PLATFORMS = ("tensorrt_plan", "onnxruntime_onnx", "pytorch_libtorch")
SUCCESS = "autofill_noplatform_success"
# Failing groups an offline validator can decide (issue 2), and the server options each ran with.
DECIDABLE_GROUPS = (
    NOAUTOFILL,
    "autofill_noplatform/common",
    "autofill_noplatform/custom",
    "autofill_noplatform/ensemble",
    "autofill_noplatform/onnx",
    "special_cases/invalid_platform",
)
# Beyond the issue's set: the server appends these cases' partial.pbtxt to a Python model's config and
# refuses them in ValidateModelConfig, from the partial alone; we append it to a minimal Python config.
EXTRA_GROUPS = ("model_metrics/invalid_config",)
PARTIAL = "partial.pbtxt"
STRICT_GROUPS = frozenset({NOAUTOFILL, "special_cases/invalid_platform"})
# test.sh treats these folders as one model although they hold no config.pbtxt.
NO_CONFIG_MODELS = frozenset({"no_config", "no_config_variable", "no_config_shape_tensor"})
# Errors that only say a file is absent which Triton's test.sh never needed: the server refused the
# case earlier, from the config alone. They are not counted as flagging the case.
ARTIFACT_RULES = frozenset({"model-file-missing"})
# Why the remaining groups are outside an offline validator's reach.
NOT_DECIDABLE = {
    "autofill_noplatform/python": "decided by running the model's auto_complete_config (a live server)",
    "autofill_noplatform/pytorch": "needs a TorchScript file that Triton's test.sh copies from its data store",
    "autofill_noplatform/tensorrt": "needs a TensorRT plan that Triton's test.sh copies from its data store",
    "autofill_noplatform/openvino": "needs an OpenVINO model that Triton's test.sh copies from its data store",
    "special_cases": "decided by the server's backend library lookup",
    "cli_messages": "about server command-line options",
    "model_metrics": "about the server's metrics options",
    "custom_parameters": "about server options",
}


@dataclass(frozen=True)
class Case:
    """One case of the suite, as its index describes it."""

    name: str  # e.g. "autofill_noplatform/ensemble/no_step"
    category: str  # the index's category, e.g. "autofill_noplatform"
    folder: Path
    layout: str  # "single-model" or "whole-repository"
    outcome: str  # "fail", "success", ...
    expected: tuple[str, ...]  # Triton's texts (basic regular expressions) for a failing case
    populated_by_test_sh: bool

    @property
    def model(self) -> str:
        """The case's model: the folder's name (for a whole repository, the model named like it)."""
        return self.folder.name

    @property
    def group(self) -> str:
        """Where the case sits: 'noautofill_platform', 'autofill_noplatform/onnx', 'special_cases/x' ..."""
        parts = self.name.split("/")
        if parts[0] == NOAUTOFILL:
            return NOAUTOFILL
        if parts[0] == "special_cases":
            return self.name
        return "/".join(parts[:2]) if len(parts) > 2 else parts[0]

    @property
    def single_model(self) -> bool:
        return (self.folder / "config.pbtxt").is_file() or self.model in NO_CONFIG_MODELS


@dataclass(frozen=True)
class CaseRun:
    """A case under one set of server options (noautofill cases run once per platform)."""

    case: Case
    strict: bool
    platform: str | None = None

    @property
    def label(self) -> str:
        """The category its rate is reported under."""
        group = self.case.group
        return f"{group} [{self.platform}]" if self.platform else group

    @property
    def id(self) -> str:
        return f"{self.case.name}[{self.platform}]" if self.platform else self.case.name


@dataclass(frozen=True)
class CaseResult:
    run: CaseRun
    decidable: bool
    flagged: bool = False  # an error on the case's model (artifact errors aside)
    matched: bool = False  # one of our messages carries Triton's expected text
    messages: tuple[str, ...] = ()
    reason: str | None = None  # why the case is not decidable offline

    @property
    def passed(self) -> bool:
        """A failing case passes when flagged; a success case when nothing is flagged."""
        return self.flagged if self.run.case.outcome == "fail" else not self.flagged


@dataclass(frozen=True)
class CategoryRate:
    label: str
    total: int
    flagged: int
    matched: int
    outcome: str  # "fail" (rates of flagged/matched) or "success" (rate of clean results)
    not_decidable: int = 0


def find_suite(start: Path | None = None) -> Path | None:
    """The folder holding the suite's index: $REPO_BUILDER_CONFORMANCE, else ../shared/conformance/triton-qa
    beside the repository root (as in CI), searched upward from ``start``."""
    override = os.environ.get(ENV_VAR)
    if override:
        base = Path(override)
        for candidate in (base, base / SUITE):
            if (candidate / INDEX).is_file():
                return candidate
        return None
    here = (start or Path(__file__)).resolve()
    for parent in (here, *here.parents):
        candidate = parent.parent / "shared" / "conformance" / SUITE
        if (candidate / INDEX).is_file():
            return candidate
        candidate = parent / "shared" / "conformance" / SUITE
        if (candidate / INDEX).is_file():
            return candidate
    return None


def load_cases(suite: Path) -> tuple[Case, ...]:
    """Every case the index lists, in its order."""
    rows = json.loads((suite / INDEX).read_text(encoding="utf-8"))
    return tuple(
        Case(
            name=row["case"],
            category=row["category"],
            folder=suite / CASES_DIR / row["case"],
            layout=row["layout"],
            outcome=row["outcome"],
            expected=tuple(text for _, text in row.get("expected") or ()) if row["outcome"] == "fail" else (),
            populated_by_test_sh=bool(row.get("populated_by_test_sh")),
        )
        for row in rows
    )


def not_decidable_reason(case: Case) -> str | None:
    """None when an offline validator can decide the case, else why not."""
    if case.outcome == "fail":
        if case.group in DECIDABLE_GROUPS or case.group in EXTRA_GROUPS:
            return None
        return NOT_DECIDABLE.get(case.group) or NOT_DECIDABLE.get(
            case.name.split("/")[0], "outside the offline scope"
        )
    if case.category != SUCCESS:
        return NOT_DECIDABLE.get(case.name.split("/")[0], "about server options")
    if case.group in ("autofill_noplatform_success/ensemble", "autofill_noplatform_success/custom"):
        return None  # their members use the identity backend, which reads no model file
    if case.group == "autofill_noplatform_success/onnx" and any(case.folder.glob("*/model.onnx")):
        return None
    return "the model file (or model.py) comes from Triton's test.sh and is not in the suite"


def case_runs(case: Case) -> tuple[CaseRun, ...]:
    """The runs Triton's test.sh makes of a case."""
    if case.group == NOAUTOFILL:
        return tuple(CaseRun(case, strict=True, platform=p) for p in NOAUTOFILL_PLATFORMS)
    return (CaseRun(case, strict=case.group in STRICT_GROUPS),)


def _copy_model(source: Path, dest: Path, platform: str | None) -> None:
    shutil.copytree(source, dest, ignore=shutil.ignore_patterns("expected*"))
    config = dest / "config.pbtxt"
    if platform is not None and config.is_file():
        # test.sh: sed -i '/platform:/d' config.pbtxt; echo 'platform: "P"' >> config.pbtxt
        lines = [line for line in config.read_text(encoding="utf-8").splitlines() if "platform:" not in line]
        config.write_text("\n".join([*lines, f'platform: "{platform}"', ""]), encoding="utf-8")
    if not any(p.is_dir() for p in dest.iterdir()):
        (dest / "1").mkdir()  # test.sh makes version folders; their content is what the case carries


def materialize_case(run: CaseRun, dest: Path) -> Path:
    """Lay out the case as a model repository under ``dest`` (created) and return its root."""
    case = run.case
    dest.mkdir(parents=True, exist_ok=True)
    if (case.folder / PARTIAL).is_file() and not (case.folder / "config.pbtxt").is_file():
        model = dest / case.model
        (model / "1").mkdir(parents=True)
        partial = (case.folder / PARTIAL).read_text(encoding="utf-8")
        (model / "config.pbtxt").write_text(
            f'name: "{case.model}"\nbackend: "python"\n{partial}', encoding="utf-8"
        )
    elif case.single_model:
        _copy_model(case.folder, dest / case.model, run.platform)
    else:
        for child in sorted(case.folder.iterdir()):
            if child.is_dir():
                _copy_model(child, dest / child.name, run.platform)
    return dest


def bre_to_regex(pattern: str) -> re.Pattern[str]:
    """A grep basic regular expression as a Python one: '\\X' is literal X, '.' and '*' keep their
    meaning, a bracket expression is kept, every other character is literal."""
    out: list[str] = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern):
            out.append(re.escape(pattern[i + 1]))
            i += 2
            continue
        if c in ".*":
            out.append(c)
        elif c == "[" and "]" in pattern[i + 2 :]:
            end = pattern.index("]", i + 2)
            out.append(pattern[i : end + 1])
            i = end + 1
            continue
        else:
            out.append(re.escape(c))
        i += 1
    return re.compile("".join(out))


def judge(run: CaseRun, diagnostics: Iterable[Diagnostic]) -> CaseResult:
    """Flagged: an error on the case's model; matched: Triton's text in one of our error messages."""
    errors = [d for d in diagnostics if d.severity == Severity.ERROR]
    if run.case.outcome == "fail":
        flagged = any(d.model == run.case.model and d.rule not in ARTIFACT_RULES for d in errors)
    else:
        flagged = bool(errors)  # a case the server loads must come out clean, every model of it
    patterns = [bre_to_regex(text) for text in run.case.expected]
    matched = any(p.search(d.message) for p in patterns for d in errors)
    return CaseResult(run, True, flagged, matched, tuple(f"{d.code} {d.model}: {d.message}" for d in errors))


def run_case(run: CaseRun, workdir: Path | None = None) -> CaseResult:
    """Materialize, validate and judge one run (not-decidable cases are reported, never run)."""
    reason = not_decidable_reason(run.case)
    if reason is not None:
        return CaseResult(run, False, reason=reason)
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        root = materialize_case(run, Path(tmp) / "models")
        report = validate_repository(root, ValidateOptions(strict=run.strict, gpu_present=False))
    return judge(run, report.diagnostics)


def run_suite(suite: Path, workdir: Path | None = None) -> tuple[CaseResult, ...]:
    return tuple(run_case(run, workdir) for case in load_cases(suite) for run in case_runs(case))


def summarize(results: Iterable[CaseResult]) -> tuple[CategoryRate, ...]:
    """Rates per category (noautofill once per platform), in first-seen order."""
    groups: dict[str, list[CaseResult]] = {}
    for r in results:
        groups.setdefault(r.run.label, []).append(r)
    rates = []
    for label, items in groups.items():
        decided = [r for r in items if r.decidable]
        outcome = "fail" if all(r.run.case.outcome == "fail" for r in items) else "success"
        rates.append(
            CategoryRate(
                label=label,
                total=len(decided),
                flagged=sum(r.flagged for r in decided),
                matched=sum(r.matched for r in decided),
                outcome=outcome,
                not_decidable=len(items) - len(decided),
            )
        )
    return tuple(rates)


def _pct(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "n/a"


def format_markdown(rates: Iterable[CategoryRate]) -> str:
    """A Markdown table of the rates, failing categories first, with totals over the decidable ones."""
    rates = list(rates)
    failing = [r for r in rates if r.outcome == "fail"]
    lines = [
        "## Conformance: Triton's qa/L0_model_config",
        "",
        "Failing cases: flagged = an error on the case's model; message = one of our messages carries the",
        "server's expected text. Success cases: clean = no error. Cases outside an offline validator's",
        "reach are counted as not decidable, never as passes.",
        "",
        "| category | decidable | flagged | message | not decidable |",
        "|---|---:|---:|---:|---:|",
    ]
    totals = {"issue": [0, 0, 0], "extra": [0, 0, 0]}
    for r in failing:
        if r.total:
            lines.append(
                f"| {r.label} | {r.total} | {_pct(r.flagged, r.total)} | {_pct(r.matched, r.total)} | {r.not_decidable} |"
            )
        bucket = totals["extra" if r.label in EXTRA_GROUPS else "issue"]
        bucket[0], bucket[1], bucket[2] = bucket[0] + r.total, bucket[1] + r.flagged, bucket[2] + r.matched
    for key, title in (
        ("issue", "all decidable failing (issue 2's set)"),
        ("extra", "beyond the issue's set"),
    ):
        total, flagged, matched = totals[key]
        if total:
            lines.append(f"| **{title}** | {total} | {_pct(flagged, total)} | {_pct(matched, total)} | |")
    skipped = [r for r in failing if not r.total]
    if skipped:
        lines.append("")
        lines.append(
            "Not decidable offline: " + ", ".join(f"{r.label} ({r.not_decidable})" for r in skipped) + "."
        )
    success = [r for r in rates if r.outcome == "success"]
    if success:
        lines += ["", "| success category | decidable | clean | not decidable |", "|---|---:|---:|---:|"]
        for r in success:
            lines.append(
                f"| {r.label} | {r.total} | {_pct(r.total - r.flagged, r.total)} | {r.not_decidable} |"
            )
    return "\n".join(lines) + "\n"
