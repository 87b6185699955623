"""The benchmark scripts' quick runs as CI's tests start them: one subprocess, its figures read back."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parents[2] / "scripts" / "bench"


def run_quick(script: str, out: Path, *extra: str, timeout: float = 900) -> tuple[dict[str, Any], str]:
    """``scripts/bench/SCRIPT --quick --json OUT EXTRA...``: the figures it wrote and its stdout; a failed run fails the
    test with the tail of its stderr."""
    done = subprocess.run([sys.executable, str(BENCH / script), "--quick", "--json", str(out), *extra],
                          capture_output=True, text=True, timeout=timeout, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(out.read_text()), done.stdout
