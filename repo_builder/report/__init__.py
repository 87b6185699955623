"""Reports people look at: bench and tune results as one self-contained HTML page with charts.

``load_record`` reads a result file (``bench --json``, or the search record ``tune`` will write) and
``write_report`` writes the page; ``bench_document`` is the JSON that ``bench --json`` writes and
``tune_document`` the search record ``tune`` is to write.
matplotlib is imported only while charts are drawn (``charts``).
"""

from __future__ import annotations

from repo_builder.report.bench_record import bench_document
from repo_builder.report.page import check_output, render_page, write_report
from repo_builder.report.records import (
    BENCH_KIND,
    BENCH_SCHEMA_VERSION,
    TUNE_KIND,
    TUNE_SCHEMA_VERSION,
    BenchRecord,
    Record,
    TuneRecord,
    load_record,
    parse_record,
)
from repo_builder.report.tune_record import tune_document

__all__ = [
    "BENCH_KIND",
    "BENCH_SCHEMA_VERSION",
    "TUNE_KIND",
    "TUNE_SCHEMA_VERSION",
    "BenchRecord",
    "Record",
    "TuneRecord",
    "bench_document",
    "check_output",
    "load_record",
    "parse_record",
    "render_page",
    "tune_document",
    "write_report",
]
