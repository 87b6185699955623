"""Measuring one candidate for real: its configs in a scratch copy of the repository, loaded into one
embedded tritonserver (explicit mode), a closed loop at the search's concurrency (perf_analyzer or the Python
gRPC client, as ``bench`` chooses).

The scratch copy is hard links (model files are never copied or changed); only the ``config.pbtxt`` of a
step whose knobs change is rewritten (atomically, so the link to the user's file is broken, never
written through). A changed step is reloaded, then the ensemble: Triton re-reads a config on load. The
user's repository is not touched until ``commit.write_winner``.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from google.protobuf import text_format

from repo_builder.errors import ToolError, UserError
from repo_builder.fsutil import write_text_atomic
from repo_builder.repository.moves import link_tree
from repo_builder.triton import start_server
from repo_builder.triton.bench import ensemble_members, measure_or_fall_back, payloads_for
from repo_builder.triton.perf_analyzer import LoadGenerator
from repo_builder.triton_config import read_config_file
from repo_builder.triton_layout import CONFIG_FILE
from repo_builder.tune.knobs import Setting, StepKnobs, apply_knobs
from repo_builder.tune.search import Measured

if TYPE_CHECKING:
    from tritonclient.grpc.model_config_pb2 import ModelConfig


PYTHON_CLIENT = LoadGenerator("python")


@dataclass(frozen=True)
class MeasureSettings:
    """How each candidate is measured."""

    concurrency: int = 4
    seconds: float = 5.0
    warmup: float = 1.0
    load_timeout: float = 300.0
    generator: LoadGenerator = PYTHON_CLIENT  # who sends the requests (tune --load-generator)


def read_model_config(repository: Path, name: str) -> ModelConfig:
    """A model's config.pbtxt, read as validate reads it (regular file inside the repository, bounded)."""
    path = repository / name / CONFIG_FILE
    config, _, problem, _, _ = read_config_file(path, repository)
    if config is None:
        raise UserError(f"{path}: {problem or 'does not parse'}; fix it (repo-builder validate says how) before tuning")
    return config


def tunable_steps(repository: Path, ensemble: str) -> dict[str, ModelConfig]:
    """The ensemble's step configs by name (each step once); an ensemble is required: tune tunes pipelines."""
    config = read_model_config(repository, ensemble)
    if config.platform != "ensemble":
        raise UserError(f"{repository / ensemble / CONFIG_FILE}: '{ensemble}' is not an ensemble; pass the model clients call (--model)")
    return {name: read_model_config(repository, name) for name in dict.fromkeys(ensemble_members(config))}


class CandidateRunner:
    """A scratch copy of the repository served by one tritonserver; ``measure(setting)`` per candidate."""

    def __init__(
        self,
        repository: Path,
        ensemble: str,
        configs: Mapping[str, ModelConfig],
        measure: MeasureSettings,
        files: Mapping[str, Sequence[bytes]] | None = None,
        log: Callable[[str], None] = lambda _: None,
        tritonserver: str | None = None,
    ) -> None:
        self.repository, self.ensemble, self.configs, self.measure_settings = repository, ensemble, dict(configs), measure
        self.files = dict(files or {})
        self.log, self.tritonserver = log, tritonserver
        self.generator = measure.generator
        self.scratch_root = Path(tempfile.mkdtemp(prefix="repo-builder-tune-"))
        self.scratch = self.scratch_root / "repository"
        self.loaded: dict[str, StepKnobs] = {}
        self.server: Any = None
        self._server_cm: Any = None

    def __enter__(self) -> CandidateRunner:
        try:
            link_tree(self.repository, self.scratch)
            self._server_cm = start_server(self.scratch, mode="explicit", tritonserver=self.tritonserver)
            self.server = self._server_cm.__enter__()
        except BaseException:
            shutil.rmtree(self.scratch_root, ignore_errors=True)
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            if self._server_cm is not None:
                self._server_cm.__exit__(None, None, None)
        finally:
            shutil.rmtree(self.scratch_root, ignore_errors=True)

    def _write(self, setting: Setting) -> list[str]:
        changed = []
        for name, knobs in setting:
            if self.loaded.get(name) == knobs:
                continue
            config = apply_knobs(self.configs[name], knobs)
            write_text_atomic(self.scratch / name / CONFIG_FILE, text_format.MessageToString(config))
            changed.append(name)
        return changed

    def measure(self, setting: Setting, concurrency: int | None = None) -> Measured:
        """``setting`` served and measured at the search's concurrency (or ``concurrency``)."""
        began = time.monotonic()
        changed = self._write(setting)
        for name in changed:  # members first, then the ensemble (Triton re-reads each config on load)
            self.server.load(name, timeout=self.measure_settings.load_timeout)
        self.server.load(self.ensemble, timeout=self.measure_settings.load_timeout)
        self.loaded.update(dict(setting))
        config = self.server.client.get_model_config(self.ensemble).config
        payloads = payloads_for(config, self.files)
        first = payloads[0][next(iter(payloads[0]))][0]
        items = max(1, int(first.shape[0])) if config.max_batch_size > 0 else 1
        steps = tuple(name for name, _ in setting)

        def fell_back(exc: ToolError) -> None:
            # The rest of the search (and the finalists' rounds) measure with the Python client, so the candidates that
            # decide the winner share one yardstick; the record says so.
            self.log(f"{exc}; measuring with the Python gRPC client from here on")
            self.generator = LoadGenerator("python", note=f"perf_analyzer failed mid-search: {' '.join(str(exc).split())[:300]}")

        settings = self.measure_settings
        result, stats, _ = measure_or_fall_back(
            self.server.client, self.server.grpc_url, self.ensemble, payloads, generator=self.generator, on_fallback=fell_back,
            concurrency=concurrency or settings.concurrency, seconds=settings.seconds, warmup=settings.warmup,
            items_per_request=items, steps=steps, batch=items if config.max_batch_size > 0 else 0)
        return Measured(
            setting=setting,
            items_per_s=result.items_per_s,
            p50_ms=result.p50_ms,
            p99_ms=result.p99_ms,
            errors=result.errors,
            step_compute_ms={s.model: s.compute_ms for s in stats[1:]},
            seconds=time.monotonic() - began,
            concurrency=concurrency or settings.concurrency,
        )
