"""`validate --live` proves the asset path with a real request through assets; `serve --nvcf` forwards
the NVCF headers and says so."""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from support.nvcf_helpers import answer, bytes_input, nvcf_headers
from support.process_output import read_until, stop_if_running

from repo_builder.cli.main import main

pytestmark = [pytest.mark.triton, pytest.mark.slow]


def test_validate_live_proves_asset_path_when_repository_takes_assets(asset_repository: Any, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["validate", str(asset_repository.repo), "--live", "--http-header-forward-pattern", "NVCF-.*",
                 "--format", "json", "--fail-on", "warning"])
    captured = capsys.readouterr()
    assert code == 0, captured.out + captured.err
    assert "resnet50: IMAGE_ASSET proven: an asset read through the NVCF headers answered exactly as IMAGE" in captured.err
    report = json.loads(captured.out)
    assert report["diagnostics"] == []


def test_validate_live_reports_inference_failure_when_asset_path_is_broken(
    asset_repository: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The live check really goes through the assets: corrupt what the step reads, and it says so."""
    repo = tmp_path / "repo"
    shutil.copytree(asset_repository.repo, repo)
    model_py = next((repo / "resnet50_preprocess").glob("*/model.py"))
    source = model_py.read_text()
    assert 'return b"".join(chunks)' in source
    model_py.write_text(source.replace('return b"".join(chunks)', 'return b"".join(chunks)[::-1]'))
    code = main(["validate", str(repo), "--live", "--http-header-forward-pattern", "NVCF-.*", "--format", "json",
                 "--fail-on", "warning"])
    report = json.loads(capsys.readouterr().out)
    assert code == 1
    [failed] = [d for d in report["diagnostics"] if d["code"] == "RB903"]
    assert failed["model"] == "resnet50" and "cannot decode image" in failed["message"]



def test_serve_nvcf_forwards_headers_when_flag_given(asset_repository: Any) -> None:
    import tritonclient.http as httpclient

    proc = subprocess.Popen([sys.executable, "-m", "repo_builder", "serve", str(asset_repository.repo), "--nvcf"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out = read_until(proc, "log ", timeout=180)
        http = re.search(r"^HTTP\s+(\S+)$", out, re.M)
        assert http is not None, out
        client = httpclient.InferenceServerClient(http.group(1).removeprefix("http://"), network_timeout=60.0)
        name = "c-500x375.jpg"
        read = answer(client, [bytes_input("IMAGE_ASSET", [name.encode()])], nvcf_headers(asset_repository.folder, [name]))
        sent = answer(client, [bytes_input("IMAGE", [asset_repository.images[name]])])
        assert read[0].tolist() == sent[0].tolist() and np.array_equal(read[1], sent[1])
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
        err = proc.stderr.read()  # type: ignore[union-attr]
    finally:
        stop_if_running(proc)  # the test failed: stop it the clean way first
    assert "--http-header-forward-pattern 'NVCF-.*'" in err


def test_serve_nvcf_refuses_other_pattern_beside_it(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code = main(["serve", str(tmp_path), "--nvcf", "--http-header-forward-pattern", "X-.*"])
    assert code == 2
    assert "--nvcf forwards 'NVCF-.*'" in capsys.readouterr().err
