"""JUnit XML for CI test tabs: one test case per model; its errors are the failure (and, under
``--fail-on warning``, its warnings too); the other findings go to system-out."""

from __future__ import annotations

import re
from functools import cache

from repo_builder.validate.records import Diagnostic, Severity
from repo_builder.validate.report import Report
from repo_builder.validate.reporters.formatting import (
    RenderSettings,
    exact,
    failing_levels,
    format_diagnostic,
    grouped,
)


@cache
def _invalid() -> re.Pattern[str]:
    # Compiled on first use: its character ranges take ~5 ms, paid by every validate run if at import.
    return re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def _xml(text: str | None) -> str:
    """XML 1.0 cannot carry control characters at all."""
    return _invalid().sub("\ufffd", exact(text))


_RANK = {Severity.ERROR: 0, Severity.WARNING: 1, Severity.INFO: 2}


def _block(d: Diagnostic) -> str:
    return _xml(format_diagnostic(d))


def render_junit(report: Report, settings: RenderSettings | None = None) -> str:
    settings = settings or RenderSettings()
    failing = failing_levels(settings.fail_on)
    location = _xml(report.repository.location or str(report.repository.root))
    groups = grouped(report)
    failures = sum(1 for _, _, ds in groups if any(d.severity in failing for d in ds))
    import xml.etree.ElementTree as ET  # stdlib, but only this format needs it: the others start faster

    suites = ET.Element("testsuites", name="repo-builder validate", tests=str(len(groups)), failures=str(failures))
    suite = ET.SubElement(
        suites, "testsuite", name=location, tests=str(len(groups)), failures=str(failures), errors="0", skipped="0"
    )
    for name, _summary, ds in groups:
        case = ET.SubElement(suite, "testcase", classname=location, name=_xml(name))
        # Most severe first (stable): the failure's type and message are the finding that refuses the model.
        failed = sorted((d for d in ds if d.severity in failing), key=lambda d: _RANK.get(d.severity, 9))
        others = [d for d in ds if d.severity not in failing]
        if failed:
            failure = ET.SubElement(case, "failure", type=failed[0].code, message=_xml(failed[0].message))
            failure.text = "\n".join(_block(d) for d in failed)
        if others:
            ET.SubElement(case, "system-out").text = "\n".join(_block(d) for d in others)
    ET.indent(suites)
    return '<?xml version="1.0" encoding="utf-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"
