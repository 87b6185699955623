"""After a build: the offline validator on the repository, and with ``--live`` the embedded Triton
(``validate_live``: every model loaded, one request per ensemble)."""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from repo_builder.pipelines.assemble import BuildResult
    from repo_builder.validate.records import ValidateOptions

Log = Callable[[str], None]


@dataclass(frozen=True)
class CheckOutcome:
    ok: bool
    errors: int
    warnings: int
    lines: tuple[str, ...] = ()
    live: dict[str, dict[str, Any]] | None = None  # model -> {"loaded", "reason", "inferred"} with --live

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"ok": self.ok, "errors": self.errors, "warnings": self.warnings, "diagnostics": list(self.lines)}
        if self.live is not None:
            data["live"] = self.live
        return data


def validate_options_for(runtime: str, pending_compile: bool) -> ValidateOptions:
    """A TensorRT repository is judged for the GPU machine it targets; deferred plans are expected."""
    from repo_builder.validate.records import ValidateOptions

    gpu = runtime == "tensorrt"
    if not gpu:
        from repo_builder.compile.gpu import gpu_present

        gpu = gpu_present()
    return ValidateOptions(allow_pending=pending_compile, gpu_present=gpu)


def check_built(result: BuildResult, *, log: Log, live: bool = False, tritonserver: Path | None = None) -> CheckOutcome:
    """Run the offline validator on the whole repository (and with ``live`` the real server); log a summary."""
    from repo_builder.validate.engine import validate_repository
    from repo_builder.validate.records import Severity

    report = validate_repository(result.repository, validate_options_for(result.runtime, result.pending_compile))
    live_results = None
    if live and not report.ok:
        log("live check skipped: the offline validation failed")
    elif live:
        from repo_builder.validate.live import LiveSettings, validate_live

        log("live: loading every model into the embedded Triton and sending one request per ensemble")
        report = validate_live(report, LiveSettings(tritonserver=str(tritonserver) if tritonserver else None))
        live_results = {
            m.name: {"loaded": m.live.loaded, "reason": m.live.reason, "inferred": m.live.inferred}
            for m in report.models
            if m.live is not None
        }
        for name, verdict in sorted(live_results.items()):
            state = "loaded" if verdict["loaded"] else f"REFUSED ({verdict['reason']})"
            if verdict["inferred"] is not None:
                state += ", answered a request" if verdict["inferred"] else ", did NOT answer a request"
            log(f"live: {name}: {state}")
    lines = tuple(
        f"{d.severity.value} {d.code} {d.path}: {d.message}" + (f" (hint: {d.hint})" if d.hint else "")
        for d in report.diagnostics
    )
    errors, warnings = report.count(Severity.ERROR), report.count(Severity.WARNING)
    for line in lines:
        log(f"  {line}")
    verdict = "passes" if report.ok else "FAILS"
    log(f"validate: {result.repository} {verdict} ({len(report.models)} models, {errors} errors, {warnings} warnings)")
    ok = report.ok
    if live_results is not None and (live_results.get(result.ensemble) or {}).get("inferred") is False:
        # We built this ensemble: a request it cannot answer is a failed build, not a warning.
        ok = False
        log(f"live: '{result.ensemble}' loaded but did not answer; see the diagnostics above")
    return CheckOutcome(ok, errors, warnings, lines, live_results)


def sample_image(width: int = 320, height: int = 240) -> bytes:
    """A small JPEG drawn on the spot (no file needed): gradients and a few shapes."""
    import numpy as np
    from PIL import Image, ImageDraw

    x = np.linspace(0, 255, width, dtype=np.float32)
    y = np.linspace(0, 255, height, dtype=np.float32)[:, None]
    rgb = np.stack([np.broadcast_to(x, (height, width)), np.broadcast_to(y, (height, width)), (x + y) / 2 % 256], axis=-1)
    image = Image.fromarray(rgb.astype(np.uint8), "RGB")
    draw = ImageDraw.Draw(image)
    draw.ellipse((width // 4, height // 4, width // 2, height // 2), fill=(250, 40, 30))
    draw.rectangle((width // 2, height // 2, width - 20, height - 20), fill=(20, 60, 220))
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", quality=90)
    return buffer.getvalue()
