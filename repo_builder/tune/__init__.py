"""``repo-builder tune``: search instance counts, threads and batching delays for every step of an
ensemble jointly, measured on the embedded Triton, and write the winner back through the safe writer.

``tune_repository`` is the library function; ``knobs`` says what may change, ``search`` how it is
searched, ``runner`` how a candidate is measured, ``record`` what is written down, ``commit`` how the
winner lands in the repository.
"""

from __future__ import annotations

from repo_builder.tune.flow import TuneRequest, TuneResult, tune_repository

__all__ = ["TuneRequest", "TuneResult", "tune_repository"]
